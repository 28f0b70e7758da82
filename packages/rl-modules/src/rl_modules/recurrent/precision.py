"""The float32 matmul precision of fused recurrent kernels: a scoped mode with TorchRL's names.

TorchRL's ``set_recurrent_matmul_precision`` / ``get_recurrent_matmul_precision`` choose the
``tl.dot`` input precision of its Triton LSTM / GRU cells: ``"ieee"`` (exact float32),
``"tf32x3"`` (three TF32 passes, close to float32) or ``"tf32"`` (fastest), or the presets
``"high-prec"`` / ``"fast"`` that become ``"tf32x3"`` / ``"tf32"`` on GPUs with TF32 tensor
cores (compute capability 8 and up) and ``"ieee"`` elsewhere. ``"auto"`` (or ``None``)
follows ``torch.get_float32_matmul_precision()`` (``"highest"`` -> ``"ieee"``, ``"high"`` ->
``"high-prec"``, ``"medium"`` -> ``"fast"``).

Here the choice is a :class:`contextvars.ContextVar`: a ``with`` block, a decorated function
or ``.set()`` in the current context, never a process-wide default, and no environment
variable is read. The PyTorch reference path of :class:`~rl_modules.LSTMModule` /
:class:`~rl_modules.GRUModule` follows PyTorch's own matmul settings; a fused backend reads
:func:`get_recurrent_matmul_precision` (``rl_kernels``' Triton cells compute in ``"ieee"``).

Example:
    >>> from rl_modules import set_recurrent_matmul_precision, get_recurrent_matmul_precision
    >>> with set_recurrent_matmul_precision("tf32x3"):
    ...     get_recurrent_matmul_precision()
    'tf32x3'
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import torch

__all__ = ["get_recurrent_matmul_precision", "set_recurrent_matmul_precision"]

CONCRETE = ("ieee", "tf32", "tf32x3")
PRESETS = ("fast", "high-prec")
MODES = (*CONCRETE, *PRESETS, "auto")
_F = TypeVar("_F", bound=Callable[..., Any])

_PRECISION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "rl_modules_recurrent_matmul_precision", default=None
)
_FROM_TORCH = {"highest": "ieee", "high": "high-prec", "medium": "fast"}


def check_precision(mode: str | None, what: str = "recurrent matmul precision") -> str | None:
    """``mode`` if it is one of :data:`MODES` or ``None``.

    Raises:
        ValueError: any other value.
    """
    if mode is None or mode in MODES:
        return mode
    raise ValueError(f"Unknown {what} {mode!r}: expected one of {MODES} or None.")


def _tensor_cores() -> bool:
    if not torch.cuda.is_available() or torch.version.hip:
        return False
    return torch.cuda.get_device_capability()[0] >= 8


def resolve_precision(mode: str | None) -> str:
    """The concrete precision (``"ieee"``, ``"tf32"`` or ``"tf32x3"``) a mode stands for here."""
    mode = check_precision(mode)
    if mode in (None, "auto"):
        mode = _FROM_TORCH.get(torch.get_float32_matmul_precision(), "ieee")
    if mode in CONCRETE:
        return mode
    if not _tensor_cores():
        return "ieee"
    return "tf32" if mode == "fast" else "tf32x3"


def get_recurrent_matmul_precision() -> str:
    """The concrete precision chosen by the innermost enclosing scope (else ``"auto"``'s)."""
    return resolve_precision(_PRECISION.get())


class set_recurrent_matmul_precision:  # TorchRL's name (lower case: used like a function)
    """Choose the recurrent kernels' matmul precision for a scope.

    A context manager and a decorator; ``.set()`` sets it for the rest of the current context.
    Building the object alone changes nothing.

    Args:
        mode: ``"ieee"``, ``"tf32"``, ``"tf32x3"``, ``"fast"``, ``"high-prec"``, ``"auto"`` or
            ``None`` (both: follow ``torch.get_float32_matmul_precision()``).

    Raises:
        ValueError: another mode (the message says "recurrent matmul precision").

    Example:
        >>> @set_recurrent_matmul_precision("ieee")
        ... def exact():
        ...     return get_recurrent_matmul_precision()
        >>> exact()
        'ieee'
    """

    def __init__(self, mode: str | None) -> None:
        self.mode = check_precision(mode)
        self._tokens: list[contextvars.Token[str | None]] = []

    def set(self) -> None:
        """Set the mode in the current context until it ends or another scope changes it."""
        _PRECISION.set(self.mode)

    def __enter__(self) -> set_recurrent_matmul_precision:
        self._tokens.append(_PRECISION.set(self.mode))
        return self

    def __exit__(self, *exc_info: object) -> None:
        _PRECISION.reset(self._tokens.pop())

    def __call__(self, func: _F) -> _F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)(self.mode):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
