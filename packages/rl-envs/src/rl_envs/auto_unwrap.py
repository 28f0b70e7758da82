"""Whether ``TransformedEnv(TransformedEnv(env, t1), t2)`` merges the two stacks: a scoped mode.

TorchRL's name and behaviour, without its process-wide state: the mode lives in a
:class:`contextvars.ContextVar`, so it holds inside a ``with`` block, a decorated function or
the context that called :meth:`set_auto_unwrap_transformed_env.set`, and nowhere else (other
threads and asyncio tasks started before keep their own value). No environment variable is
read or written. An explicit ``TransformedEnv(..., auto_unwrap=...)`` always wins.

Examples:
    >>> from rl_envs import PendulumEnv, TransformedEnv, StepCounter
    >>> from rl_envs import set_auto_unwrap_transformed_env, auto_unwrap_transformed_env
    >>> auto_unwrap_transformed_env()
    True
    >>> with set_auto_unwrap_transformed_env(False):
    ...     env = TransformedEnv(TransformedEnv(PendulumEnv(), StepCounter()))
    >>> type(env.base_env).__name__
    'TransformedEnv'
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["auto_unwrap_transformed_env", "set_auto_unwrap_transformed_env"]

_F = TypeVar("_F", bound=Callable[..., Any])

# None: nobody chose; TransformedEnv then unwraps (TorchRL's default).
_AUTO_UNWRAP: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "rl_envs_auto_unwrap_transformed_env", default=None
)
_DEFAULT = True


def auto_unwrap_transformed_env(allow_none: bool = False) -> bool | None:
    """The current mode: whether a nested ``TransformedEnv`` is merged into its wrapper.

    Args:
        allow_none: return ``None`` when no enclosing scope chose a mode, instead of the
            default (``True``).

    Returns:
        The mode of the innermost enclosing :class:`set_auto_unwrap_transformed_env`.

    Example:
        >>> from rl_envs import auto_unwrap_transformed_env
        >>> auto_unwrap_transformed_env(), auto_unwrap_transformed_env(allow_none=True)
        (True, None)
    """
    mode = _AUTO_UNWRAP.get()
    if mode is None and not allow_none:
        return _DEFAULT
    return mode


class set_auto_unwrap_transformed_env:  # TorchRL's name (lower case: used like a function)
    """Choose whether ``TransformedEnv`` unwraps a nested ``TransformedEnv``, for a scope.

    Use it as a context manager or a decorator; ``.set()`` sets the mode for the rest of
    the current context (a test fixture or a script's ``main``), like a ``ContextVar.set``.
    Building the object alone changes nothing, as in TorchRL.

    Args:
        mode: ``True`` merges ``TransformedEnv(TransformedEnv(env, t1), t2)`` into one env
            with the stack ``Compose(t1, t2)``; ``False`` keeps the inner env as ``base_env``.

    Example:
        >>> from rl_envs import set_auto_unwrap_transformed_env, auto_unwrap_transformed_env
        >>> @set_auto_unwrap_transformed_env(False)
        ... def build():
        ...     return auto_unwrap_transformed_env()
        >>> build(), auto_unwrap_transformed_env()
        (False, True)
    """

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(
                f"set_auto_unwrap_transformed_env takes a bool, got {mode!r} "
                f"({type(mode).__name__}); pass True or False."
            )
        self.mode = mode
        self._tokens: list[contextvars.Token[bool | None]] = []

    def clone(self) -> set_auto_unwrap_transformed_env:
        """A fresh object with the same mode (one per ``with`` block)."""
        return type(self)(self.mode)

    def set(self) -> None:
        """Set the mode in the current context until it ends or another scope changes it."""
        _AUTO_UNWRAP.set(self.mode)

    def __enter__(self) -> set_auto_unwrap_transformed_env:
        self._tokens.append(_AUTO_UNWRAP.set(self.mode))
        return self

    def __exit__(self, *exc_info: object) -> None:
        _AUTO_UNWRAP.reset(self._tokens.pop())

    def __call__(self, func: _F) -> _F:
        if inspect.isgeneratorfunction(func):

            @functools.wraps(func)
            def generator_wrapper(*args: Any, **kwargs: Any) -> Any:
                with self.clone():
                    return (yield from func(*args, **kwargs))

            return generator_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"set_auto_unwrap_transformed_env({self.mode})"
