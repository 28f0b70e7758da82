"""Duck-typed access to spec-like objects (``docs/contract.md`` section 6).

This package never imports ``rl_envs``: every helper here reads only the
attributes the contract lists (``shape``, ``dtype``, ``device``,
``space.low`` / ``space.high``, ``space.n`` / ``n``, ``project``, ``is_in``,
``rand``) and says clearly which one is missing.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

import torch

ActionSpace = Literal["categorical", "one_hot", "mult_one_hot"]

_SPACE_ALIASES: dict[str, ActionSpace] = {
    "categorical": "categorical",
    "one_hot": "one_hot",
    "one-hot": "one_hot",
    "onehot": "one_hot",
    "mult_one_hot": "mult_one_hot",
    "mult-one-hot": "mult_one_hot",
    "multi_one_hot": "mult_one_hot",
}


def require_attr(spec: Any, attr: str, who: str, why: str) -> Any:
    """``spec.<attr>``, or a ``TypeError`` naming ``who``, the attribute and ``why`` it is needed."""
    if not hasattr(spec, attr):
        raise TypeError(
            f"{who}: the spec-like object {type(spec).__name__} has no attribute {attr!r}, "
            f"which is needed {why}. Pass an object offering it (see docs/contract.md, "
            "section 6), e.g. an rl_envs spec."
        )
    return getattr(spec, attr)


def spec_bounds(spec: Any, who: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(low, high)`` of a bounded spec-like object.

    Args:
        spec: any object with ``space.low`` and ``space.high``.
        who: the name of the caller, used in error messages.

    Returns:
        The two bound tensors.

    Raises:
        TypeError: if the object has no ``space.low`` / ``space.high``.
    """
    space = require_attr(spec, "space", who, "to read the action bounds (space.low / space.high)")
    low = require_attr(space, "low", who, "to read the lower action bound")
    high = require_attr(space, "high", who, "to read the upper action bound")
    return torch.as_tensor(low), torch.as_tensor(high)


def spec_n(spec: Any, who: str) -> int:
    """Return the number of categories of a discrete spec-like object (``space.n`` or ``n``)."""
    space = getattr(spec, "space", None)
    n = getattr(space, "n", None) if space is not None else None
    if n is None:
        n = getattr(spec, "n", None)
    if n is None:
        raise TypeError(
            f"{who}: the spec-like object {type(spec).__name__} has neither 'space.n' nor 'n'; "
            "a discrete action space needs its number of actions. Pass a Categorical / OneHot "
            "spec-like object, or the string 'categorical' / 'one_hot'."
        )
    return int(n)


def action_space_of(spec_or_str: Any, who: str, *, allow_multi: bool = False) -> ActionSpace:
    """Decide whether a discrete action space is categorical, one-hot (or multi one-hot).

    Strings (``"categorical"``, ``"one_hot"``, ``"mult_one_hot"`` and their
    dashed forms) are taken as they are. For a spec-like object the class name
    decides (``...MultiOneHot...``, ``...OneHot...`` or ``...Categorical...``,
    as TorchRL's and rl_envs' specs are named). Multi one-hot is accepted only
    with ``allow_multi``; other multi-discrete and binary specs are refused.

    Raises:
        ValueError: for an unknown string or an unsupported spec.
    """
    if isinstance(spec_or_str, str):
        kind = _SPACE_ALIASES.get(spec_or_str.lower())
        if kind is None or (kind == "mult_one_hot" and not allow_multi):
            allowed = "'categorical', 'one_hot'" + (", 'mult_one_hot'" if allow_multi else "")
            raise ValueError(
                f"{who}: action_space was not specified/not compatible: unknown action space "
                f"{spec_or_str!r}; expected one of {allowed}."
            )
        return kind
    name = type(spec_or_str).__name__.lower().replace("_", "")
    if allow_multi and "multionehot" in name:
        return "mult_one_hot"
    if "multi" in name or "binary" in name:
        raise ValueError(
            f"{who}: action space {type(spec_or_str).__name__} is not supported; "
            "use a Categorical or OneHot spec, or pass action_space='categorical' / 'one_hot'."
        )
    if "onehot" in name:
        return "one_hot"
    if "categorical" in name:
        return "categorical"
    raise ValueError(
        f"{who}: cannot tell whether {type(spec_or_str).__name__} is a categorical or a one-hot "
        "space from its class name. Pass action_space='categorical' or 'one_hot' explicitly."
    )


def project_into(spec: Any, value: torch.Tensor, who: str) -> torch.Tensor:
    """Project ``value`` into ``spec`` with its ``project`` method (identity when already inside)."""
    project = require_attr(spec, "project", who, "to keep outputs inside the spec (safe=True)")
    return project(value)


def is_composite(spec: Any) -> bool:
    """Whether ``spec`` is Composite-like (it maps keys to specs: it has ``keys()``)."""
    return spec is not None and callable(getattr(spec, "keys", None))


def spec_of_key(spec: Any, key: Any, who: str) -> Any:
    """``spec[key]`` for a Composite-like ``spec`` (e.g. a policy's ``{"action": Bounded}``), else ``spec``.

    Raises:
        KeyError: a Composite-like spec without ``key``.
    """
    if not is_composite(spec):
        return spec
    keys = list(spec.keys(True, True))
    if key not in keys:
        raise KeyError(
            f"{who}: the Composite spec has no entry {key!r} (it holds {keys}); pass the spec of "
            "the action itself, or set action_key to one of its entries."
        )
    return spec[key]


def composite_class_of(spec: Any) -> type | None:
    """The ``Composite`` class of the library ``spec`` comes from, or ``None``.

    Looks up ``Composite`` in the modules ``spec``'s class was defined in, from
    the innermost package out (``rl_envs.specs.unbounded``, ``rl_envs.specs``,
    ``rl_envs``). Those modules are already imported (the spec exists), so this
    reads them without importing anything: this package stays free of
    ``rl_envs``.
    """
    parts = type(spec).__module__.split(".")
    for i in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:i]))
        composite = getattr(module, "Composite", None) if module is not None else None
        if isinstance(composite, type):
            return composite
    return None


def as_composite(spec: Any, out_keys: list, who: str) -> Any:
    """Wrap a bare spec of a module's single output as ``Composite({out_key: spec})``.

    As TorchRL's modules do with ``spec=``: a Composite-like ``spec`` (or
    ``None``) is returned as is; a bare spec becomes a Composite of the spec's
    own library keyed by ``out_keys[0]`` (the spec itself when that library has
    no Composite).

    Raises:
        RuntimeError: a bare spec for a module with several out_keys.
    """
    if spec is None or is_composite(spec):
        return spec
    if len(out_keys) > 1:
        raise RuntimeError(
            f"{who}: got one spec for the {len(out_keys)} out_keys {out_keys}; pass a Composite "
            "keyed by the out_keys (or no spec)."
        )
    composite = composite_class_of(spec)
    if composite is None:
        return spec
    return composite({out_keys[0]: spec})
