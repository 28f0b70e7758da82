"""Spec classes and functions looked up by name when called, so a spec module never imports back.

``Categorical.to_one_hot_spec`` returns a :class:`~rl_envs.specs.OneHot` while
``one_hot.py`` builds on ``categorical.py``; ``torch.stack`` on a spec (handled in
``_base.py``) returns what ``stacked.stack_specs`` builds while ``stacked.py`` builds on
``_base.py``. An import back would be a cycle, so the later module registers its class
or function here when it is imported. ``rl_envs.specs`` imports every spec module, so the
entries are in place before any spec exists.

Example:
    >>> import rl_envs.specs
    >>> from rl_envs.specs import _registry
    >>> _registry.lookup("OneHot") is rl_envs.specs.OneHot
    True
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")

_ENTRIES: dict[str, Any] = {}


def register(obj: T) -> T:
    """Record ``obj`` under its ``__name__`` and return it unchanged (a decorator)."""
    _ENTRIES[obj.__name__] = obj  # type: ignore[attr-defined]
    return obj


def lookup(name: str) -> Any:
    """What :func:`register` recorded under ``name``.

    Raises:
        LookupError: when nothing was registered under ``name`` (its module not imported).
    """
    try:
        return _ENTRIES[name]
    except KeyError:
        raise LookupError(
            f"no spec entry {name!r} is registered; import rl_envs.specs, which imports "
            "and registers every spec module."
        ) from None
