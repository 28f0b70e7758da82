"""Step mode vs sequence mode of the recurrent modules, set per thread by a context manager."""

from __future__ import annotations

import threading
from contextlib import ContextDecorator
from typing import Any

_LOCAL = threading.local()


def recurrent_mode() -> bool | None:
    """The mode of the innermost :class:`set_recurrent_mode` block of this thread, ``None`` outside.

    Examples:
        >>> recurrent_mode() is None
        True
    """
    modes = getattr(_LOCAL, "modes", ())
    return modes[-1] if modes else None


class set_recurrent_mode(ContextDecorator):
    """Inside the block, recurrent modules read ``[*B, T]`` sequences (``True``) or single steps (``False``).

    Losses run in sequence mode, collectors in step mode; outside any block
    a module uses its ``default_recurrent_mode``. It governs the modules of
    this package (rl_kernels) only.

    Args:
        mode: ``True`` or ``"recurrent"`` for sequences, ``False`` or ``"sequential"`` for steps.

    Examples:
        >>> with set_recurrent_mode("recurrent"):
        ...     recurrent_mode()
        True
    """

    def __init__(self, mode: bool | str = True) -> None:
        if isinstance(mode, str):
            if mode not in ("recurrent", "sequential"):
                raise ValueError(
                    "set_recurrent_mode: mode must be True, False, 'recurrent' or 'sequential', "
                    f"got {mode!r}."
                )
            mode = mode == "recurrent"
        self.mode = bool(mode)

    def __enter__(self) -> set_recurrent_mode:
        _LOCAL.modes = (*getattr(_LOCAL, "modes", ()), self.mode)
        return self

    def __exit__(self, *exc: Any) -> None:
        _LOCAL.modes = _LOCAL.modes[:-1]
