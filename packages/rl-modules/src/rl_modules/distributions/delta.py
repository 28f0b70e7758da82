"""Deterministic "distributions": a point mass, and one squashed into a box."""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import distributions as D


class Delta(D.Distribution):
    """A point mass at ``param``; its log-probability is +inf there and -inf elsewhere (as TorchRL's).

    Used for deterministic policies inside probabilistic wrappers (DDPG, TD3).
    ``rsample`` returns ``param`` itself, so gradients flow through it.

    Args:
        param: the value.
        atol: absolute tolerance of ``log_prob``'s equality test.
        rtol: relative tolerance.
        event_dims: number of trailing dims of one event. Default 1.
        batch_shape, event_shape: the split of ``param``'s shape, instead of ``event_dims``.

    Examples:
        >>> import torch
        >>> d = Delta(torch.tensor([0.5, -1.0]))
        >>> d.sample(), d.log_prob(torch.tensor([0.5, -1.0]))
        (tensor([ 0.5000, -1.0000]), tensor(inf))
    """

    arg_constraints: ClassVar[dict] = {}
    has_rsample = True

    def __init__(
        self,
        param: torch.Tensor,
        atol: float = 1e-6,
        rtol: float = 1e-6,
        event_dims: int = 1,
        *,
        batch_shape: torch.Size | tuple[int, ...] | None = None,
        event_shape: torch.Size | tuple[int, ...] | None = None,
    ) -> None:
        self.param = param
        self.atol, self.rtol = atol, rtol
        if event_shape is not None:
            event_dims = len(event_shape)
        elif batch_shape is not None:
            event_dims = param.ndim - len(batch_shape)
        self.event_dims = min(event_dims, param.ndim)
        n = param.ndim - self.event_dims
        if (batch_shape is not None and tuple(batch_shape) != tuple(param.shape[:n])) or (
            event_shape is not None and tuple(event_shape) != tuple(param.shape[n:])
        ):
            raise ValueError(
                f"Delta: batch_shape {batch_shape} and event_shape {event_shape} must split "
                f"param's shape {tuple(param.shape)}."
            )
        super().__init__(param.shape[:n], param.shape[n:], validate_args=False)

    def expand(self, batch_shape: torch.Size | tuple[int, ...], _instance: object = None) -> Delta:
        """The same point mass with ``param`` expanded to ``batch_shape + event_shape``."""
        param = self.param.expand(*batch_shape, *self.event_shape)
        return Delta(param, self.atol, self.rtol, len(self.event_shape))

    def rsample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        return self.param.expand(self._extended_shape(torch.Size(sample_shape)))

    def sample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape).clone()

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        close = torch.isclose(value, self.param.expand_as(value), atol=self.atol, rtol=self.rtol)
        if self.event_dims:
            close = close.flatten(-self.event_dims).all(-1)
        inf = torch.full(close.shape, math.inf, dtype=self.param.dtype, device=self.param.device)
        return torch.where(close, inf, -inf)

    @property
    def mean(self) -> torch.Tensor:
        return self.param

    @property
    def mode(self) -> torch.Tensor:
        return self.param

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.param


class TanhDelta(Delta):
    """A point mass at ``low + (high - low) * (tanh(param) + 1) / 2``.

    Args:
        param: the pre-squashing value.
        low: lower bound(s). Default -1.
        high: upper bound(s). Default 1.
        event_dims: number of trailing dims of one event. Default 1.
        atol: absolute tolerance of ``log_prob``.
        rtol: relative tolerance.

    Examples:
        >>> import torch
        >>> TanhDelta(torch.zeros(2), low=0.0, high=4.0).mode
        tensor([2., 2.])
    """

    def __init__(
        self,
        param: torch.Tensor,
        low: float | torch.Tensor = -1.0,
        high: float | torch.Tensor = 1.0,
        event_dims: int = 1,
        atol: float = 1e-6,
        rtol: float = 1e-6,
    ) -> None:
        low_t = torch.as_tensor(low, dtype=param.dtype, device=param.device)
        high_t = torch.as_tensor(high, dtype=param.dtype, device=param.device)
        if bool((high_t <= low_t).any()):
            raise ValueError(f"TanhDelta: every high must exceed low, got low={low}, high={high}.")
        self.low, self.high = low_t, high_t
        value = (high_t + low_t) / 2 + (high_t - low_t) / 2 * torch.tanh(param)
        super().__init__(value, atol=atol, rtol=rtol, event_dims=event_dims)

    @property
    def support(self) -> D.constraints.Constraint:
        return D.constraints.interval(self.low, self.high)
