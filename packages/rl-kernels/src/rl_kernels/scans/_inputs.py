"""Input checks and layout helpers shared by the scans.

Every scan reads tensors shaped ``[*B, T, *F]`` (``T`` at ``time_dim``). The
checks raise errors that name the argument, what was expected and the fix.
"""

from __future__ import annotations

import torch

__all__ = ["Scalar", "acc_dtype", "check_inputs", "is_scalar", "scalar_value"]

Scalar = float | torch.Tensor


def check_inputs(time_dim: int, flags: tuple[str, ...], **tensors: torch.Tensor | None) -> int:
    """Check shapes, dtypes and devices; return ``time_dim`` as a non-negative index.

    Args:
        time_dim: the time dimension (negative counts from the end).
        flags: names of the arguments that must be bool masks.
        **tensors: the arguments, by name (``None`` ones are skipped); the first
            sets the reference shape.

    Raises:
        TypeError: a non-tensor, a non-bool mask or a non-floating value.
        ValueError: mismatched shapes or devices, an out-of-range ``time_dim``, ``T == 0``.
    """
    named = {k: v for k, v in tensors.items() if v is not None}
    for name, value in named.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}.")
    ref_name, ref = next(iter(named.items()))
    for name, value in named.items():
        if value.shape != ref.shape:
            raise ValueError(
                f"{name} has shape {tuple(value.shape)} but {ref_name} has shape "
                f"{tuple(ref.shape)}: every input must be [*B, T, *F] with one shape "
                "(e.g. [*B, T, 1]). Add a missing trailing dim with .unsqueeze(-1)."
            )
        if value.device != ref.device:
            raise ValueError(
                f"{name} is on {value.device} but {ref_name} is on {ref.device}; "
                "move every input to one device."
            )
        if name in flags:
            if value.dtype != torch.bool:
                raise TypeError(
                    f"{name} must be a bool tensor, got dtype {value.dtype}. "
                    f"Pass {name}.bool() (True where the episode ended)."
                )
        elif not value.is_floating_point():
            raise TypeError(
                f"{name} must be a floating-point tensor, got dtype {value.dtype}. "
                f"Pass {name}.float()."
            )
    ndim = ref.ndim
    if not -ndim <= time_dim < ndim:
        raise ValueError(
            f"time_dim={time_dim} is out of range for inputs of shape {tuple(ref.shape)}; "
            "inputs must be [*B, T, *F] (time_dim=-2 for [*B, T, 1]). A [T] tensor "
            "needs .unsqueeze(-1)."
        )
    time_dim %= ndim
    if ref.shape[time_dim] == 0:
        raise ValueError(
            f"{ref_name} has no time steps (shape {tuple(ref.shape)}, time_dim={time_dim}): "
            "a scan needs T >= 1."
        )
    return time_dim


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """The accumulation dtype: float64 stays, every other float accumulates in float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def is_scalar(value: Scalar) -> bool:
    """A Python number or a one-element tensor."""
    return not isinstance(value, torch.Tensor) or value.numel() == 1


def scalar_value(value: Scalar) -> float:
    """The Python float of a scalar (a one-element tensor is read once)."""
    return float(value.item()) if isinstance(value, torch.Tensor) else float(value)
