"""``DiffusionActor``: a policy that denoises an action with a DDPM reverse chain.

Ho, Jain and Abbeel, "Denoising Diffusion Probabilistic Models" (2020), applied to
actions as in Chi et al., "Diffusion Policy" (2023).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict.nn import InteractionType
from tensordict.nn.probabilistic import interaction_type
from tensordict.utils import NestedKey
from torch import nn

from rl_modules.actors.common import SafeModule

__all__ = ["DDPMSampler", "DiffusionActor"]


def _default_score_network(action_dim: int, obs_dim: int | None) -> nn.Module:
    first = nn.LazyLinear(256) if obs_dim is None else nn.Linear(action_dim + obs_dim + 1, 256)
    return nn.Sequential(
        first, nn.SiLU(), nn.Linear(256, 256), nn.SiLU(), nn.Linear(256, action_dim)
    )


class DDPMSampler(nn.Module):
    """A linear-beta DDPM schedule around a noise-prediction network.

    ``forward(observation)`` runs the whole reverse chain: from ``x_T ~ N(0, I)``,
    ``x_{t-1} = (x_t - beta_t / sqrt(1 - abar_t) * eps(x_t, obs, t)) / sqrt(alpha_t)
    + sqrt(beta_t) * z`` (no noise at ``t = 0``), with ``eps`` the network applied to
    ``cat([x_t, observation, t])``. Under ``InteractionType.DETERMINISTIC`` the chain
    starts at zero and adds no noise (repeatable, not a sample of the prior).
    ``add_noise`` is the forward process used to train ``eps``.

    Args:
        score_network: maps ``[..., action_dim + obs_dim + 1]`` to ``[..., action_dim]``.
        action_dim: size of the action.
        num_steps: number of diffusion steps ``T``.
        beta_start, beta_end: ends of the linear beta schedule.

    Example:
        >>> sampler = DDPMSampler(torch.nn.Linear(2 + 3 + 1, 2), action_dim=2, num_steps=4)
        >>> sampler(torch.zeros(5, 3)).shape
        torch.Size([5, 2])
    """

    def __init__(
        self,
        score_network: nn.Module,
        action_dim: int,
        num_steps: int = 100,
        beta_start: float = 1e-4,
        beta_end: float = 0.02,
    ) -> None:
        super().__init__()
        if num_steps < 1:
            raise ValueError(f"DDPMSampler: num_steps must be >= 1, got {num_steps}.")
        if not 0.0 < beta_start <= beta_end < 1.0:
            raise ValueError(
                f"DDPMSampler: need 0 < beta_start <= beta_end < 1, got {beta_start}, {beta_end}."
            )
        self.score_network = score_network
        self.action_dim = int(action_dim)
        self.num_steps = int(num_steps)
        betas = torch.linspace(beta_start, beta_end, num_steps, dtype=torch.float64)
        alphas = 1.0 - betas
        # float64 buffers: the float32 cumulative product of 1000 factors drifts.
        self.register_buffer("betas", betas, persistent=False)
        self.register_buffer("alphas", alphas, persistent=False)
        self.register_buffer("alphas_cumprod", torch.cumprod(alphas, 0), persistent=False)

    def add_noise(
        self, clean_action: torch.Tensor, t: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(sqrt(abar_t) * a + sqrt(1 - abar_t) * noise, noise)`` for integer steps ``t``
        of shape ``clean_action.shape[:-1]`` (or a scalar)."""
        abar = self.alphas_cumprod.to(clean_action.device)[t].to(clean_action.dtype)
        abar = abar.reshape(*abar.shape, *([1] * (clean_action.ndim - abar.ndim)))
        noise = torch.randn_like(clean_action)
        return abar.sqrt() * clean_action + (1.0 - abar).sqrt() * noise, noise

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        batch, dtype, device = observation.shape[:-1], observation.dtype, observation.device
        deterministic = interaction_type() == InteractionType.DETERMINISTIC
        shape = (*batch, self.action_dim)
        x = torch.zeros(shape, dtype=dtype, device=device)
        if not deterministic:
            x = torch.randn(shape, dtype=dtype, device=device)
        betas, alphas, abar = (
            b.to(device=device, dtype=dtype) for b in (self.betas, self.alphas, self.alphas_cumprod)
        )
        for t in range(self.num_steps - 1, -1, -1):
            step = torch.full((*batch, 1), float(t), dtype=dtype, device=device)
            eps = self.score_network(torch.cat([x, observation, step], -1))
            x = (x - betas[t] / (1.0 - abar[t]).sqrt() * eps) / alphas[t].sqrt()
            if t > 0 and not deterministic:
                x = x + betas[t].sqrt() * torch.randn_like(x)
        return x


class DiffusionActor(SafeModule):
    """A policy whose action is denoised from Gaussian noise, conditioned on the observation.

    Wraps a :class:`DDPMSampler`: reads ``in_keys`` (default ``["observation"]``), writes
    ``out_keys`` (default ``["action"]``). Train ``actor.module.score_network`` to predict
    the noise of ``actor.module.add_noise(expert_action, t)``.

    Args:
        action_dim: size of the action.
        obs_dim: size of the observation, for the default score network (an MLP
            ``action_dim + obs_dim + 1 -> 256 -> 256 -> action_dim`` with SiLU; lazy first
            layer when ``obs_dim`` is None). Ignored with ``score_network``.
        score_network: the noise-prediction network (see :class:`DDPMSampler`).
        num_steps: diffusion steps (100).
        beta_start, beta_end: the linear beta schedule (1e-4, 0.02).
        in_keys, out_keys: keys read and written.
        spec: optional spec of the action (stored as ``Composite({out_key: spec})``).
        safe: project the action into ``spec``.

    Example:
        >>> from tensordict import TensorDict
        >>> actor = DiffusionActor(action_dim=2, obs_dim=3, num_steps=5)
        >>> actor(TensorDict(observation=torch.randn(4, 3), batch_size=[4]))["action"].shape
        torch.Size([4, 2])
    """

    def __init__(
        self,
        action_dim: int,
        obs_dim: int | None = None,
        score_network: nn.Module | None = None,
        num_steps: int = 100,
        beta_start: float = 1e-4,
        beta_end: float = 0.02,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        *,
        spec: Any = None,
        safe: bool = False,
    ) -> None:
        if score_network is None:
            score_network = _default_score_network(action_dim, obs_dim)
        sampler = DDPMSampler(score_network, action_dim, num_steps, beta_start, beta_end)
        super().__init__(
            sampler,
            in_keys=["observation"] if in_keys is None else in_keys,
            out_keys=["action"] if out_keys is None else out_keys,
            spec=spec,
            safe=safe,
        )
