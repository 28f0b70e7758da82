"""Whether recurrent modules read single steps or whole ``[*B, T]`` sequences."""

from __future__ import annotations

import threading
from contextlib import ContextDecorator
from typing import Any

_STATE = threading.local()


def recurrent_mode() -> bool | None:
    """The mode set by the innermost :class:`set_recurrent_mode` block, or ``None`` outside any."""
    stack = getattr(_STATE, "stack", None)
    return stack[-1] if stack else None


class set_recurrent_mode(ContextDecorator):
    """Run recurrent modules in sequence mode (``True``) or step mode (``False``) inside a block.

    Sequence mode reads ``[*B, T, ...]`` inputs (losses); step mode reads
    ``[*B, ...]`` single steps (collectors). Outside any block, each module
    uses its ``default_recurrent_mode``. The setting is per thread.

    Args:
        mode: ``True`` / ``"recurrent"`` for sequences, ``False`` / ``"sequential"`` for steps.

    Examples:
        >>> with set_recurrent_mode(True):
        ...     recurrent_mode()
        True
    """

    def __init__(self, mode: bool | str = True) -> None:
        if isinstance(mode, str):
            if mode not in ("recurrent", "sequential"):
                raise ValueError(
                    f"set_recurrent_mode: expected True/False, 'recurrent' or 'sequential', got {mode!r}."
                )
            mode = mode == "recurrent"
        self.mode = bool(mode)

    def __enter__(self) -> set_recurrent_mode:
        if not hasattr(_STATE, "stack"):
            _STATE.stack = []
        _STATE.stack.append(self.mode)
        return self

    def __exit__(self, *exc: Any) -> None:
        _STATE.stack.pop()
