"""Discrete policies: one-hot categorical, and categoricals restricted by an action mask."""

from __future__ import annotations

import math
from enum import Enum

import torch
from torch import distributions as D
from torch.nn import functional as F


def _masked_logits(
    logits: torch.Tensor | None,
    probs: torch.Tensor | None,
    mask: torch.Tensor | None,
    indices: torch.Tensor | None,
    fill: float | None,
    who: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(masked logits, bool mask)``; masked entries get ``fill`` (``None``: the dtype's min)."""
    if (logits is None) == (probs is None):
        raise ValueError(f"{who}: Either `probs` or `logits` must be specified, but not both.")
    if (mask is None) == (indices is None):
        raise ValueError(
            f"{who}: a mask or some indices must be provided, but not both: mask= is a bool "
            "[..., n] tensor (True = allowed), indices= lists the allowed actions [..., k]."
        )
    base = logits if logits is not None else probs.clamp_min(torch.finfo(probs.dtype).tiny).log()
    if indices is not None:
        mask = torch.zeros(
            *indices.shape[:-1], base.shape[-1], dtype=torch.bool, device=indices.device
        ).scatter_(-1, indices.long(), True)
    if mask.dtype != torch.bool:
        raise TypeError(f"{who}: mask must be a bool tensor (True = allowed), got {mask.dtype}.")
    if mask.shape[-1] != base.shape[-1]:
        raise ValueError(
            f"{who}: mask has {mask.shape[-1]} actions on its last dim but the logits have "
            f"{base.shape[-1]}; they must match."
        )
    if not bool(mask.any(-1).all()):
        raise ValueError(f"{who}: every row of the mask must allow at least one action.")
    value = torch.finfo(base.dtype).min if fill is None else fill
    return torch.where(mask, base, torch.full_like(base, value)), mask


class ReparamGradientStrategy(Enum):
    """How ``rsample`` of a one-hot categorical passes gradients to its logits.

    ``PassThrough``: the hard one-hot sample plus ``probs - probs.detach()``
    (straight-through, Bengio et al., 2013). ``RelaxedOneHot``: the hard
    one-hot of a Gumbel-softmax draw at temperature 1, with the gradient of that
    relaxed draw (straight-through Gumbel-softmax, Jang et al., 2017).

    Examples:
        >>> import torch
        >>> d = OneHotCategorical(logits=torch.zeros(4), grad_method=ReparamGradientStrategy.RelaxedOneHot)
        >>> d.rsample((2,)).sum(-1)
        tensor([1., 1.])
    """

    PassThrough = 1
    RelaxedOneHot = 2


def _relaxed_one_hot(
    logits: torch.Tensor, sample_shape: torch.Size | tuple[int, ...]
) -> torch.Tensor:
    """The hard one-hot of a Gumbel-softmax draw (temperature 1) with that draw's gradient."""
    relaxed = D.RelaxedOneHotCategorical(torch.tensor(1.0), logits=logits).rsample(sample_shape)
    hard = F.one_hot(relaxed.argmax(-1), relaxed.shape[-1]).to(relaxed.dtype)
    return hard + (relaxed - relaxed.detach())


def _check_grad_method(grad_method: ReparamGradientStrategy, who: str) -> None:
    if not isinstance(grad_method, ReparamGradientStrategy):
        raise TypeError(
            f"{who}: grad_method must be a ReparamGradientStrategy (PassThrough or "
            f"RelaxedOneHot), got {grad_method!r}."
        )


class OneHotCategorical(D.OneHotCategorical):
    """A categorical whose samples are one-hot vectors, with a differentiable ``rsample``.

    ``rsample`` follows ``grad_method`` (:class:`ReparamGradientStrategy`): by
    default the one-hot sample plus ``probs - probs.detach()`` so gradients
    flow to the logits (Bengio et al., 2013). ``mode`` and
    ``deterministic_sample`` are the one-hot argmax.

    Examples:
        >>> import torch
        >>> OneHotCategorical(logits=torch.tensor([0.0, 3.0, 1.0])).mode
        tensor([0., 1., 0.])
    """

    has_rsample = True

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        grad_method: ReparamGradientStrategy = ReparamGradientStrategy.PassThrough,
    ) -> None:
        _check_grad_method(grad_method, type(self).__name__)
        self.grad_method = grad_method
        super().__init__(probs=probs, logits=logits, validate_args=False)

    def rsample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        if self.grad_method is ReparamGradientStrategy.RelaxedOneHot:
            return _relaxed_one_hot(self.logits, sample_shape)
        return self.sample(sample_shape) + (self.probs - self.probs.detach())

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode


class MaskedCategorical(D.Categorical):
    """A categorical over integer actions where ``mask`` (True = allowed) removes some.

    With the default ``neg_inf=-inf`` masked-out actions have probability 0, are
    never sampled, never chosen by ``mode``, and get ``log_prob = -inf`` (their
    logits are stored as the dtype's minimum, so entropies and gradients stay
    finite). A finite ``neg_inf`` is a soft mask: the masked logits are set to it.

    Args:
        logits: unnormalised log-probabilities ``[..., n]``.
        probs: probabilities (alternative to ``logits``).
        mask: bool ``[..., n]``; every row needs one allowed action.
        indices: the allowed actions ``[..., k]`` (alternative to ``mask``).
        neg_inf: the logit of masked actions (``-inf``: a hard mask).
        use_cross_entropy: compute ``log_prob`` with ``F.cross_entropy`` (same values).

    Examples:
        >>> import torch
        >>> d = MaskedCategorical(logits=torch.tensor([5.0, 0.0, 1.0]), mask=torch.tensor([False, True, True]))
        >>> int(d.mode)
        2
        >>> int(MaskedCategorical(logits=torch.tensor([5.0, 0.0, 1.0]), indices=torch.tensor([1])).mode)
        1
    """

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
        indices: torch.Tensor | None = None,
        neg_inf: float = float("-inf"),
        use_cross_entropy: bool = True,
    ) -> None:
        self.hard_mask = neg_inf == float("-inf")
        masked, self.mask = _masked_logits(
            logits, probs, mask, indices, None if self.hard_mask else neg_inf, type(self).__name__
        )
        self.neg_inf, self.use_cross_entropy = neg_inf, use_cross_entropy
        super().__init__(logits=masked, validate_args=False)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        value = value.long()
        if self.use_cross_entropy:
            n = self._num_events
            shape = torch.broadcast_shapes(value.shape, self.logits.shape[:-1])
            flat = self.logits.expand(*shape, n).reshape(-1, n)
            lp = -F.cross_entropy(flat, value.expand(shape).reshape(-1), reduction="none")
            lp = lp.reshape(shape)
        else:
            lp = super().log_prob(value)
        if not self.hard_mask:
            return lp
        allowed = self.mask.expand(*lp.shape, self.mask.shape[-1]).gather(
            -1, value.expand(lp.shape).unsqueeze(-1)
        )
        return torch.where(allowed.squeeze(-1), lp, torch.full_like(lp, -math.inf))

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode


class MaskedOneHotCategorical(MaskedCategorical):
    """:class:`MaskedCategorical` with one-hot samples and a differentiable ``rsample``.

    Takes :class:`MaskedCategorical`'s arguments plus ``grad_method`` (a
    :class:`ReparamGradientStrategy`, straight-through by default).

    Examples:
        >>> import torch
        >>> d = MaskedOneHotCategorical(logits=torch.tensor([5.0, 0.0, 1.0]), mask=torch.tensor([False, True, True]))
        >>> d.mode
        tensor([0., 0., 1.])
    """

    has_rsample = True

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
        indices: torch.Tensor | None = None,
        neg_inf: float = float("-inf"),
        grad_method: ReparamGradientStrategy = ReparamGradientStrategy.PassThrough,
        use_cross_entropy: bool = True,
    ) -> None:
        _check_grad_method(grad_method, type(self).__name__)
        self.grad_method = grad_method
        super().__init__(
            logits,
            probs,
            mask=mask,
            indices=indices,
            neg_inf=neg_inf,
            use_cross_entropy=use_cross_entropy,
        )

    def sample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        idx = super().sample(sample_shape)
        return torch.nn.functional.one_hot(idx, self._num_events).to(self.logits.dtype)

    def rsample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        if self.grad_method is ReparamGradientStrategy.RelaxedOneHot:
            return _relaxed_one_hot(self.logits, sample_shape)
        return self.sample(sample_shape) + (self.probs - self.probs.detach())

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return super().log_prob(value.argmax(-1))

    @property
    def mode(self) -> torch.Tensor:
        return torch.nn.functional.one_hot(super().mode, self._num_events).to(self.logits.dtype)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode

    @property
    def event_shape(self) -> torch.Size:
        return torch.Size([self._num_events])

    @property
    def support(self) -> D.constraints.Constraint:
        return D.constraints.one_hot
