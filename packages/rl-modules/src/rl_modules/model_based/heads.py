"""Heads of Dreamer's agent: the actor, the continuation head, and DreamerV3's two-hot
scalar decoder."""

from __future__ import annotations

import torch
from tensordict.nn import NormalParamExtractor
from torch import nn

from rl_modules.model_based.functional import (
    DEFAULT_NUM_BINS,
    default_bins,
    two_hot_cross_entropy,
    two_hot_decode,
    two_hot_encode,
)
from rl_modules.networks import MLP

__all__ = ["ContinuationHead", "DreamerActor", "SymExpTwoHot"]


class DreamerActor(nn.Module):
    """Dreamer's actor: an ELU MLP on ``[state, belief]`` giving ``(loc, scale)``.

    ``scale = softplus(x + inv_softplus(std_bias - std_min_val)) + std_min_val`` (TorchRL's
    ``biased_softplus``), to be fed to a ``TanhNormal``.

    Args:
        out_features: action size.
        depth: hidden layers. Default 4.
        num_cells: width. Default 200.
        activation_class: activation. Default ``nn.ELU``.
        std_bias: scale for a zero pre-activation. Default 5.0.
        std_min_val: lower bound of the scale. Default 1e-4.
        device: where to create the parameters.

    Example:
        >>> actor = DreamerActor(2, depth=1, num_cells=8)
        >>> loc, scale = actor(torch.zeros(3, 4), torch.zeros(3, 5))
        >>> loc.shape, bool((scale > 0).all())
        (torch.Size([3, 2]), True)
    """

    def __init__(
        self,
        out_features: int,
        depth: int = 4,
        num_cells: int = 200,
        activation_class: type[nn.Module] = nn.ELU,
        std_bias: float = 5.0,
        std_min_val: float = 1e-4,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.backbone = MLP(
            out_features=2 * out_features,
            depth=depth,
            num_cells=num_cells,
            activation_class=activation_class,
            device=device,
        )
        self.backbone.append(
            NormalParamExtractor(scale_mapping=f"biased_softplus_{std_bias}_{std_min_val}")
        )

    def forward(
        self, state: torch.Tensor, belief: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        loc, scale = self.backbone(torch.cat([state, belief], dim=-1))
        return loc, scale


class ContinuationHead(nn.Module):
    """Predicts whether an episode continues (``1 - terminated``) from ``[state, belief]``.

    Returns the Bernoulli logit (train it with ``binary_cross_entropy_with_logits`` against
    ``1 - terminated``: the world-model losses' ``lambda_continue``) and its probability (the
    per-step discount factor of imagined lambda-returns: the actor losses'
    ``continuation_model``).

    Args:
        in_features: size of ``[state, belief]``.
        depth: hidden layers. Default 2.
        num_cells: width. Default 200.
        activation_class: activation. Default ``nn.ELU``.
        device: where to create the parameters.

    Example:
        >>> head = ContinuationHead(7, depth=1, num_cells=8)
        >>> logit, prob = head(torch.zeros(3, 4), torch.zeros(3, 3))
        >>> logit.shape, bool(((prob > 0) & (prob < 1)).all())
        (torch.Size([3, 1]), True)
    """

    def __init__(
        self,
        in_features: int,
        depth: int = 2,
        num_cells: int = 200,
        activation_class: type[nn.Module] = nn.ELU,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.net = MLP(
            in_features,
            1,
            depth=depth,
            num_cells=num_cells,
            activation_class=activation_class,
            device=device,
        )

    def forward(self, *latents: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logit = self.net(torch.cat(latents, dim=-1))
        return logit, torch.sigmoid(logit)


class SymExpTwoHot(nn.Module):
    """DreamerV3's categorical scalar: logits over ``symexp`` bins, decoded to their mean.

    Args:
        num_bins: size of the support. Default 255.

    Example:
        >>> head = SymExpTwoHot(num_bins=5)
        >>> code = head.encode(torch.tensor([-3.0, 0.0, 7.0]))
        >>> head.decode(code.log()).round(decimals=3)
        tensor([-3.,  0.,  7.])
    """

    bins: torch.Tensor

    def __init__(self, num_bins: int = DEFAULT_NUM_BINS) -> None:
        super().__init__()
        self.num_bins = num_bins
        self.register_buffer("bins", default_bins(num_bins))

    def encode(self, target: torch.Tensor) -> torch.Tensor:
        """Two-hot codes ``[*B, num_bins]`` of raw targets ``[*B]``."""
        return two_hot_encode(target, self.bins)

    def decode(self, logits: torch.Tensor) -> torch.Tensor:
        """Expected raw value ``[*B]`` of logits ``[*B, num_bins]``."""
        return two_hot_decode(logits, self.bins)

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Two-hot cross-entropy ``[*B]`` against raw targets."""
        return two_hot_cross_entropy(logits, target, self.bins)

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        """The decoded value with a trailing singleton dim, ``[*B, 1]``."""
        return self.decode(logits).unsqueeze(-1)
