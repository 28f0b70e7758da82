"""Discrete-latent RSSM of DreamerV3 (Hafner et al., 2023, arXiv:2301.04104).

The stochastic state is ``num_categoricals`` one-hot vectors of ``num_classes`` classes
(32 x 32 in the paper), sampled with straight-through gradients from a distribution mixed
with 1% uniform (``unimix``). Names and arguments follow TorchRL's ``RSSMPriorV3`` /
``RSSMPosteriorV3`` (the ``"gru"`` recurrent core).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from rl_modules.model_based.functional import straight_through_categorical

__all__ = ["RSSMPosteriorV3", "RSSMPriorV3"]


def _check_unimix(unimix: float) -> float:
    if not 0 <= unimix < 1:
        raise ValueError(f"unimix must be in [0, 1), got {unimix}.")
    return unimix


class RSSMPriorV3(nn.Module):
    """DreamerV3's sequence model and dynamics predictor.

    ``h[t] = GRU(h[t-1], SiLU(W [z[t-1], a[t-1]]))``, then ``z_hat[t] ~ Cat(MLP(h[t]))``.

    Args:
        action_spec: the action spec (only its ``shape`` is read); or give ``action_shape``
            or ``action_dim``.
        hidden_dim: width of the projections. Default 512.
        rnn_hidden_dim: belief size. Default 512.
        num_categoricals: number of categorical variables. Default 32.
        num_classes: classes per variable. Default 32.
        action_dim: size of the action (default: from the spec or ``action_shape``).
        device: where to create the parameters.
        action_shape: the action's shape, instead of ``action_spec``.
        unimix: uniform mixture of the sampled distribution (the paper uses 0.01;
            TorchRL's default is 0).

    Example:
        >>> prior = RSSMPriorV3(hidden_dim=8, rnn_hidden_dim=6, num_categoricals=4,
        ...                     num_classes=3, action_dim=2, unimix=0.01)
        >>> logits, state, belief = prior(torch.zeros(5, 12), torch.zeros(5, 6), torch.zeros(5, 2))
        >>> logits.shape, state.shape, belief.shape
        (torch.Size([5, 4, 3]), torch.Size([5, 12]), torch.Size([5, 6]))
    """

    def __init__(
        self,
        action_spec: Any = None,
        hidden_dim: int = 512,
        rnn_hidden_dim: int = 512,
        num_categoricals: int = 32,
        num_classes: int = 32,
        action_dim: int | None = None,
        device: torch.device | str | None = None,
        *,
        action_shape: torch.Size | tuple[int, ...] | None = None,
        unimix: float = 0.0,
    ) -> None:
        super().__init__()
        if action_spec is not None and action_shape is not None:
            raise ValueError("Pass only one of `action_spec` or `action_shape`, not both.")
        shape = action_spec.shape if action_spec is not None else action_shape
        self.action_shape = None if shape is None else torch.Size(shape)
        if action_dim is None and self.action_shape is not None:
            action_dim = math.prod(self.action_shape[-1:])
        self.num_categoricals = num_categoricals
        self.num_classes = num_classes
        self.rnn_hidden_dim = rnn_hidden_dim
        self.unimix = _check_unimix(unimix)
        state_dim = num_categoricals * num_classes
        first = (
            nn.LazyLinear(hidden_dim, device=device)
            if action_dim is None
            else nn.Linear(state_dim + action_dim, hidden_dim, device=device)
        )
        self.action_state_projector = nn.Sequential(first, nn.SiLU())
        self.rnn = nn.GRUCell(hidden_dim, rnn_hidden_dim, device=device)
        self.rnn_to_prior_projector = nn.Sequential(
            nn.Linear(rnn_hidden_dim, hidden_dim, device=device),
            nn.SiLU(),
            nn.Linear(hidden_dim, state_dim, device=device),
        )

    def forward(
        self, state: torch.Tensor, belief: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(prior_logits [*B, C, K], state [*B, C*K], belief [*B, rnn_hidden_dim])``."""
        x = self.action_state_projector(torch.cat([state, action], dim=-1))
        batch = x.shape[:-1]
        belief = self.rnn(x.reshape(-1, x.shape[-1]), belief.reshape(-1, belief.shape[-1]))
        belief = belief.reshape(*batch, -1)
        logits = self.rnn_to_prior_projector(belief).unflatten(
            -1, (self.num_categoricals, self.num_classes)
        )
        sample = straight_through_categorical(logits, self.unimix).flatten(-2)
        return logits, sample, belief


class RSSMPosteriorV3(nn.Module):
    """DreamerV3's encoder head: ``z[t] ~ Cat(MLP([h[t], e[t]]))``.

    Args:
        hidden_dim: width of the hidden layer. Default 512.
        num_categoricals: number of categorical variables. Default 32.
        num_classes: classes per variable. Default 32.
        rnn_hidden_dim: belief size; with ``obs_embed_dim`` the first layer is a plain
            ``Linear`` (else lazy).
        obs_embed_dim: size of the observation embedding.
        device: where to create the parameters.
        unimix: uniform mixture of the sampled distribution.

    Example:
        >>> post = RSSMPosteriorV3(hidden_dim=8, num_categoricals=4, num_classes=3,
        ...                        rnn_hidden_dim=6, obs_embed_dim=5)
        >>> logits, state = post(torch.zeros(2, 6), torch.zeros(2, 5))
        >>> logits.shape, state.shape
        (torch.Size([2, 4, 3]), torch.Size([2, 12]))
    """

    def __init__(
        self,
        hidden_dim: int = 512,
        num_categoricals: int = 32,
        num_classes: int = 32,
        rnn_hidden_dim: int | None = None,
        obs_embed_dim: int | None = None,
        device: torch.device | str | None = None,
        *,
        unimix: float = 0.0,
    ) -> None:
        super().__init__()
        self.num_categoricals = num_categoricals
        self.num_classes = num_classes
        self.unimix = _check_unimix(unimix)
        first = (
            nn.LazyLinear(hidden_dim, device=device)
            if rnn_hidden_dim is None or obs_embed_dim is None
            else nn.Linear(rnn_hidden_dim + obs_embed_dim, hidden_dim, device=device)
        )
        self.obs_rnn_to_post_projector = nn.Sequential(
            first,
            nn.SiLU(),
            nn.Linear(hidden_dim, num_categoricals * num_classes, device=device),
        )

    def forward(
        self, belief: torch.Tensor, obs_embedding: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(posterior_logits [*B, C, K], state [*B, C*K])``."""
        logits = self.obs_rnn_to_post_projector(torch.cat([belief, obs_embedding], dim=-1))
        logits = logits.unflatten(-1, (self.num_categoricals, self.num_classes))
        return logits, straight_through_categorical(logits, self.unimix).flatten(-2)
