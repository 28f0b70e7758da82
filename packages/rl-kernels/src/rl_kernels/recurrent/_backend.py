"""Which implementation runs a recurrent layer: ``"torch"`` or ``"triton"`` (imported lazily)."""

from __future__ import annotations

import functools
import os
from typing import Literal

import torch

Backend = Literal["auto", "triton", "torch"]

#: Hidden sizes above this run on torch under ``"auto"``: the fused Triton kernel keeps
#: ``[H, H]`` weight tiles per gate in one program, which stops compiling well past it.
TRITON_MAX_HIDDEN = 128


@functools.cache
def triton_available() -> bool:
    """Whether ``import triton`` works (the ``rl-kernels[triton]`` extra)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def resolve_backend(backend: str, device: torch.device, hidden_size: int, who: str) -> str:
    """Turn ``backend`` into ``"torch"`` or ``"triton"`` for tensors on ``device``.

    ``"auto"`` picks Triton for CUDA tensors when it imports and the hidden
    size fits the kernel, else torch; it never fails. ``"triton"`` raises when
    Triton is missing, when the tensors are on the CPU (unless
    ``TRITON_INTERPRET=1``, Triton's own interpreter switch) or when the hidden
    size is too large.

    Examples:
        >>> resolve_backend("auto", torch.device("cpu"), 8, "lstm")
        'torch'
    """
    if backend not in ("auto", "triton", "torch"):
        raise ValueError(f"{who}: backend must be 'auto', 'triton' or 'torch', got {backend!r}.")
    if backend == "torch":
        return "torch"
    if backend == "auto":
        ok = device.type == "cuda" and hidden_size <= TRITON_MAX_HIDDEN and triton_available()
        return "triton" if ok else "torch"
    if not triton_available():
        raise ImportError(
            f"{who}: backend='triton' needs the triton package; install rl-kernels[triton] "
            "or pass backend='auto' / 'torch'."
        )
    if device.type != "cuda" and not _interpreting():
        raise RuntimeError(
            f"{who}: backend='triton' got tensors on {device}, but Triton kernels run on CUDA. "
            "Move the module and inputs to a GPU, pass backend='torch' (or 'auto'), or set "
            "TRITON_INTERPRET=1 before importing triton to run the kernels in Triton's CPU "
            "interpreter (slow; for tests)."
        )
    if hidden_size > TRITON_MAX_HIDDEN:
        raise ValueError(
            f"{who}: backend='triton' supports hidden_size <= {TRITON_MAX_HIDDEN}, got "
            f"{hidden_size}; pass backend='auto' or 'torch'."
        )
    return "triton"
