"""``set_gym_backend`` / ``gym_backend``: TorchRL's backend switch, for Gymnasium only.

TorchRL can run on ``gym`` or ``gymnasium`` and switches between them with
``set_gym_backend``. Here Gymnasium is the one backend: ``set_gym_backend``
accepts ``"gymnasium"``, the ``gymnasium`` module or a callable returning it
(as a context manager, a decorator or with ``.set()``) and changes nothing;
any other backend is refused with a clear error. Scripts written for TorchRL
that pin Gymnasium therefore run unchanged. Both names are also importable from
``rl_envs.libs.gym`` (TorchRL's module). Gymnasium is imported on first use (it is
an optional extra of this package).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["gym_backend", "set_gym_backend"]


def _check_backend(backend: Any) -> None:
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
    if name != "gymnasium":
        raise ValueError(
            f"set_gym_backend({name!r}): only Gymnasium is supported here (got {name!r}). "
            "Use set_gym_backend('gymnasium'), or port the code to Gymnasium "
            "(`import gymnasium as gym`)."
        )


class set_gym_backend(contextlib.ContextDecorator):
    """Selects the Gym backend; only ``"gymnasium"`` is accepted (see the module docstring).

    Args:
        backend: ``"gymnasium"``, the ``gymnasium`` module, or a callable returning it.
            A callable is called when the context is entered (or at ``.set()``).

    Raises:
        ValueError: for any other backend (``"gym"`` included).

    Example:
        >>> import gymnasium
        >>> with set_gym_backend("gymnasium"):
        ...     gym_backend() is gymnasium
        True
        >>> @set_gym_backend(gymnasium)
        ... def make():
        ...     return gym_backend("spaces").Box
        >>> make() is gymnasium.spaces.Box
        True
    """

    def __init__(self, backend: str | ModuleType | Callable[[], ModuleType]) -> None:
        if isinstance(backend, (str, ModuleType)):
            _check_backend(backend)
        elif not callable(backend):
            raise TypeError(
                f"set_gym_backend takes a string, a module or a callable returning a module; "
                f"got {type(backend).__name__}."
            )
        self.backend = backend

    def _resolve(self) -> None:
        if not isinstance(self.backend, (str, ModuleType)):
            _check_backend(self.backend())

    def set(self) -> None:
        """Sets the backend for the rest of the script (a check: Gymnasium is always used)."""
        self._resolve()

    def __enter__(self) -> set_gym_backend:
        self._resolve()
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def gym_backend(submodule: str | None = None) -> ModuleType:
    """The Gym backend module (always ``gymnasium``), or one of its submodules.

    Args:
        submodule: e.g. ``"spaces"`` or ``"wrappers"``; ``None`` for the package.

    Example:
        >>> gym_backend().__name__, gym_backend("spaces").__name__
        ('gymnasium', 'gymnasium.spaces')
    """
    return importlib.import_module("gymnasium" if submodule is None else f"gymnasium.{submodule}")
