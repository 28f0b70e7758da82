"""Gaussian policies: an independent Normal and a Normal truncated to a box."""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import distributions as D

from rl_modules.distributions.tanh_normal import ScaleArg, resolve_scale

_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class IndependentNormal(D.Independent):
    """A Normal whose last dim is one event (log-probabilities summed over it).

    Args:
        loc: mean.
        scale: standard deviation (positive): a tensor, a number, or a callable
            of ``loc`` such as ``torch.ones_like``.
        upscale: see ``tanh_loc``.
        tanh_loc: if ``True``, ``loc`` becomes ``upscale * tanh(loc / upscale)``.
        event_dim: number of trailing dims of one event. Default 1.

    Examples:
        >>> import torch
        >>> d = IndependentNormal(torch.zeros(4, 2), torch.ones(4, 2))
        >>> d.log_prob(d.sample()).shape
        torch.Size([4])
    """

    def __init__(
        self,
        loc: torch.Tensor,
        scale: ScaleArg,
        upscale: float = 5.0,
        tanh_loc: bool = False,
        event_dim: int = 1,
    ) -> None:
        self.upscale, self.tanh_loc, self._event_dim = upscale, tanh_loc, event_dim
        self.update(loc, scale)

    def update(self, loc: torch.Tensor, scale: ScaleArg) -> None:
        """Swap in new parameters (same options)."""
        if self.tanh_loc:
            loc = self.upscale * torch.tanh(loc / self.upscale)
        scale = resolve_scale(scale, loc)
        super().__init__(
            D.Normal(loc, scale, validate_args=False), self._event_dim, validate_args=False
        )

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The mean (also the mode)."""
        return self.base_dist.loc


class TruncatedNormal(D.Distribution):
    """A Normal restricted to ``[low, high]``, sampled exactly by inverse CDF.

    The last dim is one event. ``mode`` is ``loc`` clamped into the box;
    ``mean`` and ``entropy`` are closed forms.

    Args:
        loc: location of the untruncated Normal.
        scale: its standard deviation.
        upscale: see ``tanh_loc``.
        low: lower bound(s), broadcastable to ``loc``. Default -1.
        high: upper bound(s). Default 1.
        tanh_loc: if ``True``, ``loc`` becomes ``upscale * tanh(loc / upscale)``.

    Examples:
        >>> import torch
        >>> d = TruncatedNormal(torch.zeros(3), torch.ones(3), low=-0.5, high=0.5)
        >>> bool(d.sample((100,)).abs().max() <= 0.5)
        True
    """

    arg_constraints: ClassVar[dict] = {"loc": D.constraints.real, "scale": D.constraints.positive}
    has_rsample = True

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor,
        upscale: float | torch.Tensor = 5.0,
        low: float | torch.Tensor = -1.0,
        high: float | torch.Tensor = 1.0,
        tanh_loc: bool = False,
    ) -> None:
        if tanh_loc:
            loc = upscale * torch.tanh(loc / upscale)
        loc, scale = torch.broadcast_tensors(loc, scale)
        self.device = loc.device
        self.loc, self.scale = loc, scale
        self.low = torch.as_tensor(low, dtype=loc.dtype, device=loc.device)
        self.high = torch.as_tensor(high, dtype=loc.dtype, device=loc.device)
        if bool((self.high <= self.low).any()):
            raise ValueError(
                f"TruncatedNormal: every high must exceed low, got low={low}, high={high}."
            )
        self._a = (self.low - loc) / scale
        self._b = (self.high - loc) / scale
        self._cdf_a = torch.special.ndtr(self._a)
        self._cdf_b = torch.special.ndtr(self._b)
        self._z = (self._cdf_b - self._cdf_a).clamp_min(torch.finfo(loc.dtype).tiny)
        super().__init__(loc.shape[:-1], loc.shape[-1:], validate_args=False)

    @staticmethod
    def _phi(x: torch.Tensor) -> torch.Tensor:
        return torch.exp(-0.5 * x * x - _LOG_SQRT_2PI)

    def rsample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        shape = self._extended_shape(torch.Size(sample_shape))
        u = torch.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        p = self._cdf_a + u * (self._cdf_b - self._cdf_a)
        eps = torch.finfo(self.loc.dtype).eps
        x = torch.special.ndtri(p.clamp(eps, 1 - eps))
        return torch.minimum(torch.maximum(self.loc + self.scale * x, self.low), self.high)

    def sample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        x = (value - self.loc) / self.scale
        lp = -0.5 * x * x - _LOG_SQRT_2PI - self.scale.log() - self._z.log()
        inside = (value >= self.low) & (value <= self.high)
        lp = torch.where(inside, lp, torch.full_like(lp, -math.inf))
        return lp.sum(-1)

    @property
    def mean(self) -> torch.Tensor:
        return self.loc + self.scale * (self._phi(self._a) - self._phi(self._b)) / self._z

    @property
    def mode(self) -> torch.Tensor:
        return torch.minimum(torch.maximum(self.loc, self.low), self.high)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The mode: ``loc`` clamped into ``[low, high]``."""
        return self.mode

    def entropy(self) -> torch.Tensor:
        a, b = self._a, self._b
        # a * phi(a) is 0 at a = -inf; nan_to_num guards the infinite-bound case.
        term = torch.nan_to_num(a * self._phi(a)) - torch.nan_to_num(b * self._phi(b))
        h = _LOG_SQRT_2PI + 0.5 + self.scale.log() + self._z.log() + term / (2 * self._z)
        return h.sum(-1)

    @property
    def support(self) -> D.constraints.Constraint:
        return D.constraints.interval(self.low, self.high)
