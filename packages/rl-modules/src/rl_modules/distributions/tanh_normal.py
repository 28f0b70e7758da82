"""A Normal squashed by tanh and rescaled to ``[low, high]``."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
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


# (id(low), id(high)) -> (key, weakref(low), weakref(high), unit, half_range, mid)
_BOUNDS_MEMO: dict[tuple[int, int], tuple] = {}
_BOUNDS_MEMO_SIZE = 64


def _bounds_key(low: torch.Tensor, high: torch.Tensor) -> tuple[int, ...] | None:
    """What identifies a pair of bound tensors and their contents, or ``None`` when they
    cannot be remembered (autograd, inference tensors: no version counter)."""
    if low.requires_grad or high.requires_grad or low.is_inference() or high.is_inference():
        return None
    return (id(low), id(high), low._version, high._version)


ScaleArg = torch.Tensor | float | Callable[[torch.Tensor], torch.Tensor]


def resolve_scale(scale: ScaleArg, loc: torch.Tensor) -> torch.Tensor:
    """A scale given as a tensor, a number, or a callable of ``loc`` (``torch.ones_like``)."""
    if isinstance(scale, torch.Tensor):
        return scale.to(loc.device) if scale.device != loc.device else scale
    if callable(scale):
        return scale(loc)
    return torch.as_tensor(scale, dtype=loc.dtype, device=loc.device)


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
    values on or beyond the bounds give large but finite log-probabilities.
    :meth:`rsample_and_log_prob` scores the exact pre-tanh draw.

    Args:
        loc: the mean of the Normal before squashing.
        scale: its standard deviation (positive): a tensor, a number, or a
            callable of ``loc`` such as ``torch.ones_like``.
        upscale: see ``tanh_loc``.
        low: lower bound(s) of the action, broadcastable to ``loc``. Default -1.
        high: upper bound(s). Default 1.
        event_dims: number of trailing dims forming one event. Default
            ``min(1, loc.ndim)``.
        tanh_loc: if ``True``, ``loc`` is first mapped to
            ``upscale * tanh(loc / upscale)``.
        safe_tanh: if ``True`` (default), ``tanh`` is clamped ``eps`` inside
            ``(-1, 1)`` (its gradient passes the clamp), so samples never round
            onto or past the bounds.
        eps: clamping margin of the squashing and its inverse, relative to the
            bounds. Defaults to the dtype's resolution.

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
        scale: ScaleArg,
        upscale: float | torch.Tensor = 5.0,
        low: float | torch.Tensor = -1.0,
        high: float | torch.Tensor = 1.0,
        event_dims: int | None = None,
        tanh_loc: bool = False,
        safe_tanh: bool = True,
        eps: float | None = None,
    ) -> None:
        loc = (
            torch.as_tensor(loc, dtype=torch.get_default_dtype())
            if not isinstance(loc, torch.Tensor)
            else loc
        )
        self.device = loc.device
        self.low = _as_bound(low, loc)
        self.high = _as_bound(high, loc)
        numbers = isinstance(low, int | float) and isinstance(high, int | float)
        if numbers:
            if high <= low:
                raise ValueError(
                    f"TanhNormal: every high must exceed low, got low={low}, high={high}."
                )
            self._set_affine(low == -1 and high == 1)
        elif torch.compiler.is_compiling():
            # tensor bounds: reading their values would break the compiled graph; the
            # rescaling below is exact for [-1, 1] too (times 1, plus 0)
            self._set_affine(False)
        else:
            self._set_tensor_bounds(low, high)
        self.upscale, self.tanh_loc, self.safe_tanh = upscale, tanh_loc, safe_tanh
        self._event_dims = event_dims
        self.eps = torch.finfo(loc.dtype).resolution if eps is None else eps
        self.update(loc, scale)

    def _set_affine(self, unit: bool) -> None:
        self._unit = unit
        if unit:
            # [-1, 1] (the default): no rescaling, so bounds of any shape leave the
            # sample shape that of loc, as TorchRL's (which then skips its affine map)
            self._half_range, self._mid = self.high.new_ones(()), self.low.new_zeros(())
        else:
            self._half_range = (self.high - self.low) / 2
            self._mid = (self.high + self.low) / 2

    def _set_tensor_bounds(self, low: object, high: object) -> None:
        """Checks tensor bounds and derives the affine map, once per pair of bound tensors.

        A policy builds a distribution per step from the same bound tensors; the check
        reads their values (a device sync), so its result is kept while both tensors
        are alive and unmodified (same objects, same version counters).
        """
        key = _bounds_key(self.low, self.high)
        hit = _BOUNDS_MEMO.get(key[:2]) if key is not None else None
        if hit is not None and hit[0] == key and hit[1]() is self.low and hit[2]() is self.high:
            self._unit, self._half_range, self._mid = hit[3:]
            return
        if bool((self.high <= self.low).any()):
            raise ValueError(f"TanhNormal: every high must exceed low, got low={low}, high={high}.")
        self._set_affine(bool((self.low == -1).all() and (self.high == 1).all()))
        if key is not None:
            if len(_BOUNDS_MEMO) >= _BOUNDS_MEMO_SIZE:
                _BOUNDS_MEMO.clear()
            _BOUNDS_MEMO[key[:2]] = (
                key,
                weakref.ref(self.low),
                weakref.ref(self.high),
                self._unit,
                self._half_range,
                self._mid,
            )

    def update(self, loc: torch.Tensor, scale: ScaleArg) -> None:
        """Swap in new parameters (same bounds and options)."""
        if self.tanh_loc:
            loc = self.upscale * torch.tanh(loc / self.upscale)
        scale = resolve_scale(scale, loc)
        if scale.shape != loc.shape:
            loc, scale = torch.broadcast_tensors(loc, scale)
        self.loc, self.scale = loc, scale
        event_dims = min(1, loc.ndim) if self._event_dims is None else self._event_dims
        self.event_dims = min(event_dims, loc.ndim)
        self._cache: tuple[torch.Tensor, torch.Tensor] | None = None
        n = loc.ndim - self.event_dims
        super().__init__(loc.shape[:n], loc.shape[n:], validate_args=False)

    def _squash(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.tanh(x)
        if self.safe_tanh:
            # keep samples off the bounds; the gradient stays tanh's (straight through)
            clamped = t.clamp(-1 + self.eps, 1 - self.eps)
            t = clamped if not t.requires_grad else t + (clamped - t).detach()
        return t if self._unit else self._mid + self._half_range * t

    def _draw(self, sample_shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
        shape = self._extended_shape(torch.Size(sample_shape))
        return self.loc + self.scale * torch.randn(
            shape, dtype=self.loc.dtype, device=self.loc.device
        )

    def rsample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        x = self._draw(sample_shape)
        y = self._squash(x)
        self._cache = (y, x)
        return y

    def sample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def rsample_and_log_prob(
        self, sample_shape: torch.Size | tuple[int, ...] = ()
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised sample and the log-probability of its exact pre-tanh draw.

        Scoring the draw itself (not the inverse of the rounded action) keeps the
        log-probability and its gradients exact where ``tanh`` saturates.
        """
        x = self._draw(sample_shape)
        return self._squash(x), self._log_prob_pre_tanh(x)

    def sample_and_log_prob(
        self, sample_shape: torch.Size | tuple[int, ...] = ()
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A detached sample and the log-probability of its draw (score-function gradients)."""
        with torch.no_grad():
            x = self._draw(sample_shape)
            y = self._squash(x)
        return y, self._log_prob_pre_tanh(x)

    def _pre_tanh(self, value: torch.Tensor) -> torch.Tensor:
        if self._cache is not None and self._cache[0] is value:
            return self._cache[1]
        u = ((value - self._mid) / self._half_range).clamp(-1 + self.eps, 1 - self.eps)
        return torch.atanh(u)

    def _log_prob_pre_tanh(self, x: torch.Tensor) -> torch.Tensor:
        var = self.scale.pow(2)
        normal_lp = (
            -((x - self.loc) ** 2) / (2 * var) - self.scale.log() - 0.5 * math.log(2 * math.pi)
        )
        lp = normal_lp - tanh_log_abs_det_jacobian(x)
        if not self._unit:
            lp = lp - self._half_range.log()
        if self.event_dims:
            lp = lp.sum(tuple(range(-self.event_dims, 0)))
        return lp

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return self._log_prob_pre_tanh(self._pre_tanh(value))

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The image of the Normal's mode: ``squash(loc)``."""
        return self._squash(self.loc)

    @property
    def mode(self) -> torch.Tensor:
        """``squash(loc)``, the image of the Normal's mode (TorchRL's convention).

        The density's own maximiser is :meth:`get_mode`.
        """
        return self.deterministic_sample

    @torch.no_grad()
    def get_mode(self, iters: int = 20) -> torch.Tensor:
        """The maximiser of the density in action space, per coordinate.

        In ``x`` (pre-tanh) the action density is
        ``g(x) = -(x - loc)^2 / (2 scale^2) + 2 log cosh x`` up to a constant;
        its maxima satisfy ``x = loc + 2 scale^2 tanh(x)``, so they lie in
        ``loc -+ 2 scale^2``. The best of 64 points of that interval seeds a
        few guarded Newton steps on ``g'``.
        """
        loc, var = self.loc, self.scale.pow(2)
        width = 2 * var
        grid = torch.linspace(-1.0, 1.0, 64, dtype=loc.dtype, device=loc.device)
        xs = loc.unsqueeze(-1) + width.unsqueeze(-1) * grid
        g = -((xs - loc.unsqueeze(-1)) ** 2) / (2 * var.unsqueeze(-1)) - tanh_log_abs_det_jacobian(
            xs
        )
        x = xs.gather(-1, g.argmax(-1, keepdim=True)).squeeze(-1)
        lo, hi = loc - width, loc + width
        for _ in range(iters):
            t = torch.tanh(x)
            d1 = -(x - loc) / var + 2 * t
            d2 = -1 / var + 2 * (1 - t * t)
            step = torch.where(d2 < 0, d1 / d2, torch.zeros_like(x))
            x = torch.minimum(torch.maximum(x - step, lo), hi)
        return self._squash(x)

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
