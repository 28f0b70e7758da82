"""Which implementation runs: ``"auto"``, ``"triton"`` or ``"torch"``.

Triton is an optional dependency (``pip install "rl-kernels[triton]"``): it is
imported on first use only, and ``"auto"`` falls back on the torch path when it
is missing, when the tensors are not on a CUDA device, or (once, with a warning)
when a Triton launch fails. ``TRITON_INTERPRET=1`` is Triton's own switch for
running kernels on CPU tensors through its interpreter; it is what the tests use.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from typing import TypeVar

import torch

__all__ = ["BACKENDS", "resolve_backend", "run_with_fallback", "triton_available"]

BACKENDS = ("auto", "triton", "torch")

_T = TypeVar("_T")
_broken: set[str] = set()


@functools.cache
def triton_available() -> bool:
    """Whether ``triton`` can be imported (checked once)."""
    try:
        import triton  # noqa: F401
    except Exception:  # a broken install counts as missing: "auto" must never fail on it
        return False
    return True


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def resolve_backend(backend: str, device: torch.device) -> str:
    """Turn a requested backend into the one that runs for tensors on ``device``.

    Args:
        backend: ``"auto"`` (Triton on CUDA tensors when it imports, else torch),
            ``"triton"`` or ``"torch"``.
        device: the device of the inputs.

    Returns:
        ``"triton"`` or ``"torch"``.

    Raises:
        ValueError: an unknown backend, or ``"triton"`` for CPU tensors without
            ``TRITON_INTERPRET=1``.
        ImportError: ``"triton"`` when Triton is not installed.

    Examples:
        >>> resolve_backend("auto", torch.device("cpu"))
        'torch'
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
    if backend == "torch":
        return "torch"
    if backend == "auto":
        cuda = device.type == "cuda"
        return "triton" if cuda and "triton" not in _broken and triton_available() else "torch"
    if not triton_available():
        raise ImportError(
            'backend="triton" needs Triton, which is not installed. Install it with '
            '`pip install "rl-kernels[triton]"`, or use backend="auto" or "torch".'
        )
    if device.type != "cuda" and not _interpreting():
        raise ValueError(
            f'backend="triton" needs CUDA tensors, got tensors on {device}. Move them to a GPU, '
            'use backend="torch" (or "auto"), or set TRITON_INTERPRET=1 before importing triton '
            "to run the kernels through Triton's (slow) interpreter."
        )
    return "triton"


def run_with_fallback(
    requested: str, chosen: str, triton_fn: Callable[[], _T], torch_fn: Callable[[], _T]
) -> _T:
    """Run ``triton_fn`` if ``chosen == "triton"``; under ``"auto"`` a failure warns once and falls back.

    An explicit ``backend="triton"`` never falls back: its errors propagate.
    """
    if chosen != "triton":
        return torch_fn()
    if requested != "auto":
        return triton_fn()
    try:
        return triton_fn()
    except Exception as err:  # compilation or launch failure on this machine
        _broken.add("triton")
        warnings.warn(
            f"rl_kernels: the Triton kernel failed ({type(err).__name__}: {err}); "
            'backend="auto" uses the torch path from now on.',
            RuntimeWarning,
            stacklevel=3,
        )
        return torch_fn()
