"""A differentiable reverse linear scan over ``[N, T]`` rows, for either backend.

For ``y[t] = x[t] + g[t] * y[t + 1]`` the adjoint is the same recurrence run
forward in time: ``dx[t] = dy[t] + g[t - 1] * dx[t - 1]`` and
``dg[t] = dx[t] * y[t + 1]``. So the backward pass is one more scan (with the
discounts shifted by one step) on the same backend as the forward pass.
"""

from __future__ import annotations

from typing import Any

import torch

from rl_kernels.scans._torch_scan import reverse_scan_time_major

__all__ = ["linear_scan_rows", "scan_rows"]


def scan_rows(x: torch.Tensor, g: torch.Tensor, backend: str, reverse: bool = True) -> torch.Tensor:
    """``y[t] = x[t] + g[t] * y[t -/+ 1]`` along dim 1 of ``[N, T]`` tensors, without autograd.

    ``reverse=True`` runs from the last step back (``y[t + 1]``), ``False`` forward
    (``y[t - 1]``). Returns a new ``[N, T]`` tensor.
    """
    if backend == "triton":
        from rl_kernels.scans._triton_scan import triton_linear_scan

        return triton_linear_scan(x, g, reverse=reverse)
    xt, gt = x.t(), g.t()
    if not reverse:
        xt, gt = xt.flip(0), gt.flip(0)
    y = reverse_scan_time_major(xt.contiguous(), gt.contiguous())
    if not reverse:
        y = y.flip(0)
    return y.t().contiguous()  # a 2-D transpose: torch's fast blocked copy


class _LinearScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, g: torch.Tensor, backend: str) -> torch.Tensor:
        y = scan_rows(x, g, backend)
        ctx.backend = backend
        ctx.save_for_backward(g, y)
        return y

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        g, y = ctx.saved_tensors
        shifted = torch.zeros_like(g)
        shifted[:, 1:] = g[:, :-1]
        grad_x = scan_rows(grad_y, shifted, ctx.backend, reverse=False)
        grad_g = None
        if ctx.needs_input_grad[1]:
            y_next = torch.zeros_like(y)
            y_next[:, :-1] = y[:, 1:]
            grad_g = grad_x * y_next
        return grad_x, grad_g, None


def linear_scan_rows(x: torch.Tensor, g: torch.Tensor, backend: str) -> torch.Tensor:
    """Differentiable reverse scan along dim 1 of ``[N, T]`` tensors (``x`` and ``g`` of one shape)."""
    if torch.is_grad_enabled() and (x.requires_grad or g.requires_grad):
        return _LinearScan.apply(x, g, backend)
    return scan_rows(x, g, backend)
