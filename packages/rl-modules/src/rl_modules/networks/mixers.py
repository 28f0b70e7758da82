"""Value mixers: per-agent chosen-action values ``[*B, n_agents, 1]`` to a team value ``[*B, 1]``.

Used by :class:`rl_objectives.QMixerLoss` (value decomposition for cooperative teams).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["Mixer", "QMixer", "VDNMixer"]


class Mixer(nn.Module):
    """Base of the mixers: checks the inputs, then calls :meth:`mix`.

    ``forward(chosen_action_value)`` or ``forward(chosen_action_value, state)`` (when
    ``needs_state``) with ``chosen_action_value`` of shape ``[*B, n_agents, 1]`` and
    ``state`` of shape ``[*B, *state_shape]``; returns ``[*B, 1]``.

    Args:
        n_agents: number of agents whose values are mixed.
        needs_state: whether :meth:`mix` reads a global state.
        state_shape: shape of one state (without batch dims); ``()`` without a state.
        device: where the parameters live.
    """

    def __init__(
        self,
        n_agents: int,
        needs_state: bool,
        state_shape: Sequence[int] | torch.Size,
        device: torch.device | str | None,
    ) -> None:
        super().__init__()
        if n_agents < 1:
            raise ValueError(f"{type(self).__name__}: n_agents must be >= 1, got {n_agents}.")
        self.n_agents = n_agents
        self.needs_state = needs_state
        self.state_shape = torch.Size(state_shape)
        self.device = device

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        name = type(self).__name__
        expected = 2 if self.needs_state else 1
        if len(inputs) != expected:
            kind = "Mixer that needs state" if self.needs_state else "Mixer that doesn't need state"
            limit = "more than 2 inputs" if self.needs_state else "more than 1 input"
            raise ValueError(
                f"{name}: {kind} was passed {limit} or fewer than needed: expected {expected} "
                "input(s) "
                f"({'chosen_action_value, state' if self.needs_state else 'chosen_action_value'}), "
                f"got {len(inputs)}. "
                + (
                    "Give the global state as second in_key, e.g. "
                    "in_keys=[('agents', 'chosen_action_value'), 'state']."
                    if self.needs_state
                    else "A VDN mixer reads no state: in_keys=[('agents', 'chosen_action_value')]."
                )
            )
        value = inputs[0]
        state = inputs[1] if self.needs_state else None
        nd = len(self.state_shape) if self.needs_state else 0
        if state is not None and tuple(state.shape[state.ndim - nd :]) != tuple(self.state_shape):
            raise ValueError(
                f"{name}: Mixer network expected state with ending shape "
                f"{list(self.state_shape)}, got {tuple(state.shape)}."
            )
        if value.ndim < 2 or value.shape[-2:] != (self.n_agents, 1):
            raise ValueError(
                f"{name}: Mixer network expected chosen_action_value with last 2 dimensions "
                f"[n_agents={self.n_agents}, 1], got {tuple(value.shape)}. Pick each agent's "
                "action value first (a Q-value head's 'chosen_action_value', with a trailing "
                "singleton dim) and check that the mixer's n_agents matches the env's group."
            )
        batch = value.shape[:-2]
        if state is not None and state.shape[:-nd] != batch:
            raise ValueError(
                f"{name}: expected a state of shape [*B={list(batch)}, "
                f"*state_shape={list(self.state_shape)}] (the batch of chosen_action_value), got "
                f"{tuple(state.shape)}."
            )
        out = self.mix(value, state)
        if out.shape != (*batch, 1):
            raise RuntimeError(
                f"{name}.mix returned shape {tuple(out.shape)}; expected {(*batch, 1)}."
            )
        return out

    def mix(self, chosen_action_value: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        """Mix ``[*B, n_agents, 1]`` values (and the state) into ``[*B, 1]``."""
        raise NotImplementedError


class VDNMixer(Mixer):
    """Value-decomposition network mixer: the team value is the sum of the agents' values.

    Sunehag et al. 2017, "Value-Decomposition Networks For Cooperative Multi-Agent
    Learning", arXiv:1706.05296.

    Args:
        n_agents: number of agents.
        device: unused (no parameters); kept for TorchRL's signature.

    Examples:
        >>> import torch
        >>> VDNMixer(n_agents=3, device="cpu")(torch.ones(5, 3, 1)).squeeze(-1)
        tensor([3., 3., 3., 3., 3.])
    """

    def __init__(self, n_agents: int, device: torch.device | str | None = None) -> None:
        super().__init__(n_agents=n_agents, needs_state=False, state_shape=(), device=device)

    def mix(self, chosen_action_value: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        return chosen_action_value.sum(-2)


class QMixer(Mixer):
    """QMIX mixer: a monotonic mixing network whose weights come from hypernetworks of the state.

    Rashid et al. 2018, "QMIX: Monotonic Value Function Factorisation for Deep
    Multi-Agent Reinforcement Learning", arXiv:1803.11485. With ``q`` the agents'
    values and ``s`` the flattened state::

        h = elu(q @ |W1(s)| + b1(s))          # W1(s): [n_agents, embed], b1(s): [embed]
        Q_tot = h @ |W2(s)| + V(s)            # W2(s): [embed, 1], V: Linear-ReLU-Linear

    The absolute values make ``Q_tot`` non-decreasing in each agent's value.

    Args:
        state_shape: shape of one global state (flattened inside).
        mixing_embed_dim: width of the mixing layer.
        n_agents: number of agents.
        device: where the parameters live.

    Examples:
        >>> import torch
        >>> mixer = QMixer(state_shape=(6,), mixing_embed_dim=8, n_agents=3, device="cpu")
        >>> mixer(torch.randn(4, 3, 1), torch.randn(4, 6)).shape
        torch.Size([4, 1])
    """

    def __init__(
        self,
        state_shape: Sequence[int] | torch.Size,
        mixing_embed_dim: int,
        n_agents: int,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(
            n_agents=n_agents, needs_state=True, state_shape=state_shape, device=device
        )
        self.embed_dim = mixing_embed_dim
        self.state_dim = math.prod(self.state_shape)
        self.hyper_w_1 = nn.Linear(self.state_dim, mixing_embed_dim * n_agents, device=device)
        self.hyper_b_1 = nn.Linear(self.state_dim, mixing_embed_dim, device=device)
        self.hyper_w_final = nn.Linear(self.state_dim, mixing_embed_dim, device=device)
        self.V = nn.Sequential(
            nn.Linear(self.state_dim, mixing_embed_dim, device=device),
            nn.ReLU(),
            nn.Linear(mixing_embed_dim, 1, device=device),
        )

    def mix(self, chosen_action_value: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        assert state is not None  # forward checked it
        batch = chosen_action_value.shape[:-2]
        s = state.reshape(-1, self.state_dim)
        q = chosen_action_value.reshape(-1, 1, self.n_agents)
        w1 = self.hyper_w_1(s).abs().view(-1, self.n_agents, self.embed_dim)
        b1 = self.hyper_b_1(s).unsqueeze(-2)
        hidden = F.elu(torch.bmm(q, w1) + b1)  # [N, 1, embed]
        w2 = self.hyper_w_final(s).abs().unsqueeze(-1)  # [N, embed, 1]
        out = torch.bmm(hidden, w2) + self.V(s).unsqueeze(-1)
        return out.reshape(*batch, 1)
