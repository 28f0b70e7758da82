"""A Normal squashed by tanh and rescaled to ``[low, high]``."""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import distributions as D
from torch.nn import functional as F

_LOG2 = math.log(2.0)


def _gauss_hermite(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Nodes and weights of n-point Gauss-Hermite quadrature (Golub-Welsch)."""
    off = torch.sqrt(torch.arange(1, n, dtype=torch.float64) / 2)
    nodes, vecs = torch.linalg.eigh(torch.diag(off, 1) + torch.diag(off, -1))
    return nodes, math.sqrt(math.pi) * vecs[0] ** 2


# For the deterministic estimate of E[tanh(X)].
_GH_NODES, _GH_WEIGHTS = _gauss_hermite(32)


def _as_bound(bound: float | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(bound, dtype=like.dtype, device=like.device)


def tanh_log_abs_det_jacobian(x: torch.Tensor) -> torch.Tensor:
    """``log(1 - tanh(x)^2)`` computed without cancellation for large ``|x|``.

    Uses ``1 - tanh(x)^2 = 4 / (e^x + e^-x)^2``, i.e.
    ``2 * (log 2 - x - softplus(-2x))``, which stays finite where the naive
    form rounds to ``log(0)``.
    """
    return 2.0 * (_LOG2 - x - F.softplus(-2.0 * x))


class TanhNormal(D.Distribution):
    """``y = low + (high - low) * (tanh(x) + 1) / 2`` with ``x ~ Normal(loc, scale)``.

    The last ``event_dims`` dimensions are the event (their log-probabilities
    are summed). ``log_prob`` uses the pre-tanh value cached by the last
    ``rsample``/``sample`` when it is handed that very tensor, and otherwise
    inverts the squashing with the input clamped ``eps`` inside the bounds, so
    values on the bounds give large but finite log-probabilities.

    Args:
        loc: the mean of the Normal before squashing.
        scale: its standard deviation (positive).
        low: lower bound(s) of the action, broadcastable to ``loc``. Default -1.
        high: upper bound(s). Default 1.
        event_dims: number of trailing dims forming one event. Default 1.
        tanh_loc: if ``True``, ``loc`` is first mapped to
            ``upscale * tanh(loc / upscale)``.
        upscale: see ``tanh_loc``.
        eps: clamping margin of the inverse squashing, relative to the bounds.
            Defaults to the dtype's resolution.

    Examples:
        >>> import torch
        >>> d = TanhNormal(torch.zeros(3), torch.ones(3), low=-2.0, high=2.0)
        >>> a = d.rsample((5,))
        >>> a.shape, d.log_prob(a).shape
        (torch.Size([5, 3]), torch.Size([5]))
    """

    arg_constraints: ClassVar[dict] = {"loc": D.constraints.real, "scale": D.constraints.positive}
    has_rsample = True

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor,
        low: float | torch.Tensor = -1.0,
        high: float | torch.Tensor = 1.0,
        event_dims: int = 1,
        tanh_loc: bool = False,
        upscale: float = 5.0,
        eps: float | None = None,
    ) -> None:
        if tanh_loc:
            loc = upscale * torch.tanh(loc / upscale)
        loc, scale = torch.broadcast_tensors(loc, scale)
        self.loc = loc
        self.scale = scale
        self.low = _as_bound(low, loc)
        self.high = _as_bound(high, loc)
        if bool((self.high <= self.low).any()):
            raise ValueError(f"TanhNormal: every high must exceed low, got low={low}, high={high}.")
        self._half_range = (self.high - self.low) / 2
        self._mid = (self.high + self.low) / 2
        self.event_dims = min(event_dims, loc.ndim)
        self.eps = torch.finfo(loc.dtype).resolution if eps is None else eps
        self._cache: tuple[torch.Tensor, torch.Tensor] | None = None
        n = loc.ndim - self.event_dims
        super().__init__(loc.shape[:n], loc.shape[n:], validate_args=False)

    def _squash(self, x: torch.Tensor) -> torch.Tensor:
        return self._mid + self._half_range * torch.tanh(x)

    def rsample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        shape = self._extended_shape(torch.Size(sample_shape))
        x = self.loc + self.scale * torch.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        y = self._squash(x)
        self._cache = (y, x)
        return y

    def sample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def _pre_tanh(self, value: torch.Tensor) -> torch.Tensor:
        if self._cache is not None and self._cache[0] is value:
            return self._cache[1]
        u = ((value - self._mid) / self._half_range).clamp(-1 + self.eps, 1 - self.eps)
        return torch.atanh(u)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        x = self._pre_tanh(value)
        var = self.scale.pow(2)
        normal_lp = (
            -((x - self.loc) ** 2) / (2 * var) - self.scale.log() - 0.5 * math.log(2 * math.pi)
        )
        lp = normal_lp - tanh_log_abs_det_jacobian(x) - self._half_range.log()
        if self.event_dims:
            lp = lp.sum(tuple(range(-self.event_dims, 0)))
        return lp

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The image of the Normal's mode: ``squash(loc)``."""
        return self._squash(self.loc)

    @property
    def mode(self) -> torch.Tensor:
        """``squash(loc)``, the image of the Normal's mode (TorchRL's convention)."""
        return self.deterministic_sample

    @property
    def mean(self) -> torch.Tensor:
        """``E[y]``, by 32-point Gauss-Hermite quadrature (deterministic, no sampling)."""
        nodes = _GH_NODES.to(self.loc)
        weights = _GH_WEIGHTS.to(self.loc)
        x = self.loc.unsqueeze(-1) + math.sqrt(2.0) * self.scale.unsqueeze(-1) * nodes
        e_tanh = (torch.tanh(x) * weights).sum(-1) / math.sqrt(math.pi)
        return self._mid + self._half_range * e_tanh

    @property
    def support(self) -> D.constraints.Constraint:
        return D.constraints.interval(self.low, self.high)
