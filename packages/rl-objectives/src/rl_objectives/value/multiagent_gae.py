"""GAE for per-agent values with team-level rewards (cooperative multi-agent RL)."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from rl_objectives.value.gae import GAE
from rl_objectives.value.registry import ValueEstimators, register_value_estimator

__all__ = ["MultiAgentGAE"]


def broadcast_to_agents(x: torch.Tensor, value: torch.Tensor, agent_dim: int) -> torch.Tensor:
    """``x`` expanded along ``agent_dim`` to ``value``'s shape when it lacks that dim.

    Raises:
        ValueError: if ``x`` has neither ``value.ndim`` nor ``value.ndim - 1`` dims.
    """
    if x.ndim == value.ndim:
        return x
    if x.ndim != value.ndim - 1:
        raise ValueError(
            f"MultiAgentGAE: a reward/done/terminated of shape {tuple(x.shape)} fits neither "
            f"per-agent values {tuple(value.shape)} (same number of dims) nor team-level signals "
            "(one dim fewer, the agent dim)."
        )
    dim = agent_dim % value.ndim
    return x.unsqueeze(dim).expand(value.shape)


@register_value_estimator(
    ValueEstimators.MAGAE, default_kwargs={"gamma": 0.99, "lmbda": 0.95, "differentiable": True}
)
class MultiAgentGAE(GAE):
    """:class:`~rl_objectives.value.GAE` when the critic gives one value per agent.

    Values are ``[*B, T, n_agents, 1]`` while reward / done / terminated may be
    team-level (``[*B, T, 1]``): those are broadcast along ``agent_dim`` before
    the GAE recursion (per-agent signals pass unchanged). ``advantage`` and
    ``value_target`` have the values' shape; with ``average_gae`` each agent's
    advantage is standardised on its own.

    Args:
        agent_dim: the agent dimension of the value tensor (default ``-2``).
        **kwargs: :class:`~rl_objectives.value.GAE` arguments.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({
        ...     "state_value": torch.zeros(4, 3, 1),
        ...     ("next", "state_value"): torch.zeros(4, 3, 1),
        ...     ("next", "reward"): torch.ones(4, 1),
        ...     ("next", "done"): torch.zeros(4, 1, dtype=torch.bool),
        ... }, batch_size=[4])
        >>> MultiAgentGAE(gamma=1.0, lmbda=1.0)(td)["advantage"][:, 0, 0]
        tensor([4., 3., 2., 1.])
    """

    def __init__(self, *, agent_dim: int = -2, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.agent_dim = agent_dim

    def _estimate(
        self,
        td: TensorDictBase,
        value: torch.Tensor,
        next_value: torch.Tensor,
        reward: torch.Tensor,
        done: torch.Tensor,
        terminated: torch.Tensor,
        time_dim: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        reward, done, terminated = (
            broadcast_to_agents(x, value, self.agent_dim) for x in (reward, done, terminated)
        )
        average, self.average_gae = self.average_gae, False
        try:
            advantage, target = super()._estimate(
                td, value, next_value, reward, done, terminated, time_dim
            )
        finally:
            self.average_gae = average
        if average:
            dim = self.agent_dim % advantage.ndim
            dims = [d for d in range(advantage.ndim) if d != dim]
            mean = advantage.mean(dims, keepdim=True)
            std = advantage.std(dims, keepdim=True).clamp_min(1e-4)
            advantage = (advantage - mean) / std
        return advantage, target
