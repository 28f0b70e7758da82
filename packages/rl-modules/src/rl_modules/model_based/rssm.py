"""Gaussian recurrent state-space model of Dreamer v1 (Hafner et al., 2019, arXiv:1811.04551).

The belief ``h`` (deterministic, a GRU state) and the state ``s`` (stochastic, diagonal
Gaussian) evolve as::

    h[t+1] = GRU(h[t], ELU(W [s[t], a[t]]))          (RSSMPrior)
    p(s[t+1] | h[t+1]) = N(mu(h[t+1]), sigma(h[t+1]))  (RSSMPrior, the "prior")
    q(s[t+1] | h[t+1], e[t+1]) = N(...)               (RSSMPosterior, given the embedding e)

Names, arguments and defaults are TorchRL's (``torchrl.modules.RSSMPrior`` / ``RSSMPosterior``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from tensordict.nn import NormalParamExtractor
from torch import nn

__all__ = ["RSSMPosterior", "RSSMPrior"]


def _first_linear(in_features: int | None, out_features: int, device: Any) -> nn.Module:
    if in_features is None:
        return nn.LazyLinear(out_features, device=device)
    return nn.Linear(in_features, out_features, device=device)


class RSSMPrior(nn.Module):
    """The transition of the RSSM: next belief and the Gaussian prior over the next state.

    Args:
        action_spec: the action spec (only its ``shape`` is read); may be ``None`` when
            ``action_dim`` is given.
        hidden_dim: width of the projections (the GRU input size). Default 200.
        rnn_hidden_dim: size of the belief (the GRU state). Default 200.
        state_dim: size of the stochastic state. Default 30.
        scale_lb: lower bound of the prior's standard deviation. Default 0.1.
        action_dim: size of the action; defaults to the product of ``action_spec.shape``.
        device: where to create the parameters.

    Example:
        >>> prior = RSSMPrior(None, hidden_dim=8, rnn_hidden_dim=6, state_dim=4, action_dim=2)
        >>> mean, std, state, belief = prior(torch.zeros(3, 4), torch.zeros(3, 6), torch.zeros(3, 2))
        >>> state.shape, belief.shape, bool((std >= 0.1).all())
        (torch.Size([3, 4]), torch.Size([3, 6]), True)
    """

    def __init__(
        self,
        action_spec: Any = None,
        hidden_dim: int = 200,
        rnn_hidden_dim: int = 200,
        state_dim: int = 30,
        scale_lb: float = 0.1,
        action_dim: int | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if action_dim is None and action_spec is not None:
            action_dim = math.prod(action_spec.shape[-1:])
        self.rnn = nn.GRUCell(hidden_dim, rnn_hidden_dim, device=device)
        in_features = None if action_dim is None else state_dim + action_dim
        self.action_state_projector = nn.Sequential(
            _first_linear(in_features, hidden_dim, device), nn.ELU()
        )
        self.rnn_to_prior_projector = nn.Sequential(
            nn.Linear(rnn_hidden_dim, hidden_dim, device=device),
            nn.ELU(),
            nn.Linear(hidden_dim, 2 * state_dim, device=device),
            NormalParamExtractor(scale_mapping="softplus", scale_lb=scale_lb),
        )
        self.state_dim = state_dim
        self.rnn_hidden_dim = rnn_hidden_dim
        self.action_shape = None if action_spec is None else torch.Size(action_spec.shape)

    def forward(
        self,
        state: torch.Tensor,
        belief: torch.Tensor,
        action: torch.Tensor,
        noise: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One transition.

        Args:
            state: previous stochastic state ``[*B, state_dim]``.
            belief: previous belief ``[*B, rnn_hidden_dim]``.
            action: action ``[*B, action_dim]``.
            noise: standard-normal noise for the sample (drawn when ``None``).

        Returns:
            ``(prior_mean, prior_std, state, belief)``: the prior's parameters, a
            reparameterised sample of the next state and the next belief.
        """
        x = self.action_state_projector(torch.cat([state, action], dim=-1))
        batch = x.shape[:-1]
        belief = self.rnn(x.reshape(-1, x.shape[-1]), belief.reshape(-1, belief.shape[-1]))
        belief = belief.reshape(*batch, -1)
        prior_mean, prior_std = self.rnn_to_prior_projector(belief)
        if noise is None:
            noise = torch.randn_like(prior_std)
        return prior_mean, prior_std, prior_mean + noise * prior_std, belief


class RSSMPosterior(nn.Module):
    """The filter of the RSSM: the Gaussian posterior over the state given belief and observation.

    Args:
        hidden_dim: width of the hidden layer. Default 200.
        state_dim: size of the stochastic state. Default 30.
        scale_lb: lower bound of the posterior's standard deviation. Default 0.1.
        rnn_hidden_dim: size of the belief; with ``obs_embed_dim``, the first layer is a
            plain ``Linear`` (else lazy, as in TorchRL).
        obs_embed_dim: size of the observation embedding.
        device: where to create the parameters.

    Example:
        >>> post = RSSMPosterior(hidden_dim=8, state_dim=4, rnn_hidden_dim=6, obs_embed_dim=5)
        >>> mean, std, state = post(torch.zeros(3, 6), torch.zeros(3, 5))
        >>> state.shape
        torch.Size([3, 4])
    """

    def __init__(
        self,
        hidden_dim: int = 200,
        state_dim: int = 30,
        scale_lb: float = 0.1,
        rnn_hidden_dim: int | None = None,
        obs_embed_dim: int | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        in_features = (
            None
            if rnn_hidden_dim is None or obs_embed_dim is None
            else rnn_hidden_dim + obs_embed_dim
        )
        self.obs_rnn_to_post_projector = nn.Sequential(
            _first_linear(in_features, hidden_dim, device),
            nn.ELU(),
            nn.Linear(hidden_dim, 2 * state_dim, device=device),
            NormalParamExtractor(scale_mapping="softplus", scale_lb=scale_lb),
        )
        self.hidden_dim = hidden_dim
        self.state_dim = state_dim

    def forward(
        self,
        belief: torch.Tensor,
        obs_embedding: torch.Tensor,
        noise: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(posterior_mean, posterior_std, state)`` with ``state`` a reparameterised sample."""
        mean, std = self.obs_rnn_to_post_projector(torch.cat([belief, obs_embedding], dim=-1))
        if noise is None:
            noise = torch.randn_like(std)
        return mean, std, mean + noise * std
