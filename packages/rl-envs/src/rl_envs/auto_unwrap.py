"""Whether ``TransformedEnv(TransformedEnv(env, t1), t2)`` flattens to one env (TorchRL's toggle).

By default a ``TransformedEnv`` built on another plain ``TransformedEnv`` takes over its
transforms (``TransformedEnv(env, Compose(t1, t2))``). ``set_auto_unwrap_transformed_env(False)``
keeps the nesting instead, for the envs built while it is active: as a context manager, a
decorator, or process-wide with ``.set()``. An explicit ``TransformedEnv(auto_unwrap=...)``
always wins. The setting is mirrored in the ``AUTO_UNWRAP_TRANSFORMED_ENV`` environment
variable, so worker processes started afterwards see it too.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

__all__ = ["auto_unwrap_transformed_env", "set_auto_unwrap_transformed_env"]

_ENV_VAR = "AUTO_UNWRAP_TRANSFORMED_ENV"
_TRUE = {"1", "true", "yes", "on"}


def auto_unwrap_transformed_env(allow_none: bool = False) -> bool | None:
    """The current setting: ``True`` (the default) unless turned off.

    Args:
        allow_none: return ``None`` when nothing was set instead of the default ``True``.

    Example:
        >>> from rl_envs import auto_unwrap_transformed_env, set_auto_unwrap_transformed_env
        >>> with set_auto_unwrap_transformed_env(False):
        ...     auto_unwrap_transformed_env()
        False
    """
    value = os.environ.get(_ENV_VAR)
    if value is None:
        return None if allow_none else True
    return value.strip().lower() in _TRUE


class set_auto_unwrap_transformed_env:  # TorchRL's (lower-case) name
    """Sets whether nested ``TransformedEnv`` s are flattened: context manager or decorator.

    Args:
        mode: ``False`` keeps ``TransformedEnv(TransformedEnv(env))`` nested.

    Example:
        >>> from rl_envs import PendulumEnv, StepCounter, TransformedEnv
        >>> from rl_envs import set_auto_unwrap_transformed_env
        >>> with set_auto_unwrap_transformed_env(False):
        ...     env = TransformedEnv(TransformedEnv(PendulumEnv(), StepCounter()))
        >>> type(env.base_env).__name__
        'TransformedEnv'
        >>> type(TransformedEnv(TransformedEnv(PendulumEnv())).base_env).__name__
        'PendulumEnv'
    """

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._previous: list[str | None] = []

    def set(self) -> None:
        """Applies the setting from now on (process-wide; :meth:`__exit__` undoes it)."""
        self._previous.append(os.environ.get(_ENV_VAR))
        os.environ[_ENV_VAR] = str(self.mode)

    def __enter__(self) -> None:
        self.set()

    def __exit__(self, *exc: Any) -> None:
        previous = self._previous.pop()
        if previous is None:
            os.environ.pop(_ENV_VAR, None)
        else:
            os.environ[_ENV_VAR] = previous

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Decorates ``func``: it runs with the setting active."""

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)(self.mode):
                return func(*args, **kwargs)

        return wrapper
