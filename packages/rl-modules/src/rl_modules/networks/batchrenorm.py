"""Batch renormalisation (Ioffe, 2017, arXiv:1702.03275)."""

from __future__ import annotations

import torch
from torch import nn


class BatchRenorm1d(nn.Module):
    """Batch renormalisation over the channel dim (dim 1) of ``[N, C, *]`` inputs.

    In training, ``x_hat = (x - mu_B) / sigma_B * r + d`` with
    ``r = clip(sigma_B / sigma, 1/max_r, max_r)`` and
    ``d = clip((mu_B - mu) / sigma, -max_d, max_d)`` (both without gradient;
    ``mu``, ``sigma`` the running statistics). During the first
    ``warmup_steps`` updates ``r`` and ``d`` are relaxed to 1 and 0 (plain
    batch norm), abruptly or linearly (``smooth=True``). In eval mode the
    running statistics are used, as in ``nn.BatchNorm1d``. The output is then
    scaled by ``weight`` and shifted by ``bias``.

    Args:
        num_features: number of channels ``C``.
        momentum: update rate of the running mean and (unbiased) variance.
        eps: added to the variances.
        max_r: bound of the scale correction ``r``.
        max_d: bound of the shift correction ``d``.
        warmup_steps: number of updates before the corrections apply fully.
        smooth: ramp the corrections in linearly over ``warmup_steps``.

    Examples:
        >>> import torch
        >>> brn = BatchRenorm1d(3, warmup_steps=0)
        >>> brn(torch.randn(8, 3)).shape
        torch.Size([8, 3])
        >>> int(brn.num_batches_tracked)
        1
    """

    def __init__(
        self,
        num_features: int,
        *,
        momentum: float = 0.01,
        eps: float = 1e-5,
        max_r: float = 3.0,
        max_d: float = 5.0,
        warmup_steps: int = 10000,
        smooth: bool = False,
    ) -> None:
        super().__init__()
        self.num_features, self.momentum, self.eps = num_features, momentum, eps
        self.max_r, self.max_d = max_r, max_d
        self.warmup_steps, self.smooth = warmup_steps, smooth
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))

    def _warmup_factor(self) -> torch.Tensor | float:
        if self.warmup_steps <= 0:
            return 1.0
        steps = self.num_batches_tracked.to(self.running_mean.dtype)
        if self.smooth:
            return (steps / self.warmup_steps).clamp_max(1.0)
        return (steps >= self.warmup_steps).to(steps.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim < 2 or x.shape[1] != self.num_features:
            raise ValueError(
                f"BatchRenorm1d: expected an input [N, {self.num_features}, *], got shape "
                f"{tuple(x.shape)}."
            )
        view = (1, -1) + (1,) * (x.ndim - 2)
        running_std = (self.running_var + self.eps).sqrt()
        if self.training:
            dims = [0, *range(2, x.ndim)]
            mean = x.mean(dims)
            var = x.var(dims, unbiased=False)
            std = (var + self.eps).sqrt()
            with torch.no_grad():
                r = (std / running_std).clamp(1 / self.max_r, self.max_r)
                d = ((mean - self.running_mean) / running_std).clamp(-self.max_d, self.max_d)
                factor = self._warmup_factor()
                r = 1.0 + (r - 1.0) * factor
                d = d * factor
            out = (x - mean.view(view)) / std.view(view) * r.view(view) + d.view(view)
            with torch.no_grad():
                n = x.numel() // x.shape[1]
                self.running_var.lerp_(var * n / max(n - 1, 1), self.momentum)
                self.running_mean.lerp_(mean, self.momentum)
                self.num_batches_tracked += 1
        else:
            out = (x - self.running_mean.view(view)) / running_std.view(view)
        return out * self.weight.view(view) + self.bias.view(view)
