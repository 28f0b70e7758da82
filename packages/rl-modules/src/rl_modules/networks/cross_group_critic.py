"""A centralised critic over several agent groups (MAPPO, Yu et al., 2022, across groups).

:class:`MultiAgentMLP` centralises within one group. Here each group's agents
are embedded by a group encoder (so groups may observe different things), every
agent embedding of every group goes through one MLP trunk, and each agent gets
a value from its slice of the trunk's output: a group's values depend on what
all groups observe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch
from tensordict.nn import TensorDictModule
from tensordict.utils import NestedKey
from torch import nn

from rl_modules.networks.mlp import MLP


@dataclasses.dataclass
class CrossCriticGroupSpec:
    """One group of agents seen by :class:`CrossGroupCritic`.

    Args:
        obs_dim: features of one agent's observation.
        n_agents: agents in the group.
        obs_key: where the group's observations ``[*B, n_agents, obs_dim]`` are read.
        value_key: where its values ``[*B, n_agents, 1]`` are written.
    """

    obs_dim: int
    n_agents: int
    obs_key: NestedKey
    value_key: NestedKey


class CrossGroupNet(nn.Module):
    """The network of :class:`CrossGroupCritic`: one observation tensor per group in, one value tensor per group out."""

    def __init__(
        self,
        group_map: dict[str, CrossCriticGroupSpec],
        d_model: int,
        trunk_depth: int,
        trunk_cells: int,
        activation_class: type[nn.Module],
        share_params: bool,
        detach_groups: Iterable[str] | None,
        device: torch.device | str | None,
    ) -> None:
        super().__init__()
        if not group_map:
            raise ValueError("CrossGroupCritic: group_map must describe at least one group.")
        unknown = set(detach_groups or ()) - set(group_map)
        if unknown:
            raise ValueError(
                f"CrossGroupCritic: detach_groups names unknown groups {sorted(unknown)}; the "
                f"groups are {list(group_map)}."
            )
        self.groups = dict(group_map)
        self.detach_groups = frozenset(detach_groups or ())
        self.encoders = nn.ModuleDict(
            {
                name: nn.Sequential(
                    nn.Linear(spec.obs_dim, d_model, device=device), activation_class()
                )
                for name, spec in group_map.items()
            }
        )
        n_total = sum(spec.n_agents for spec in group_map.values())
        self.trunk = MLP(
            in_features=n_total * d_model,
            out_features=n_total * d_model,
            depth=trunk_depth,
            num_cells=trunk_cells,
            activation_class=activation_class,
            device=device,
        )
        self.shared_head = nn.Linear(d_model, 1, device=device) if share_params else None
        self.group_heads = (
            None
            if share_params
            else nn.ModuleDict({name: nn.Linear(d_model, 1, device=device) for name in group_map})
        )

    def forward(self, *group_obs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        embeddings = []
        for (name, spec), obs in zip(self.groups.items(), group_obs, strict=True):
            if tuple(obs.shape[-2:]) != (spec.n_agents, spec.obs_dim):
                raise ValueError(
                    f"CrossGroupCritic: group {name!r} ({spec.obs_key!r}) expected observations "
                    f"[*B, n_agents={spec.n_agents}, obs_dim={spec.obs_dim}], got "
                    f"{tuple(obs.shape)}."
                )
            emb = self.encoders[name](obs)
            embeddings.append(emb.detach() if name in self.detach_groups else emb)
        agents = torch.cat(embeddings, -2)  # [*B, n_total, d_model]
        joint = self.trunk(agents.flatten(-2)).unflatten(-1, agents.shape[-2:])
        per_group = joint.split([spec.n_agents for spec in self.groups.values()], -2)
        if self.shared_head is not None:
            return tuple(self.shared_head(g) for g in per_group)
        heads = self.group_heads
        return tuple(heads[name](g) for name, g in zip(self.groups, per_group, strict=True))


class CrossGroupCritic(TensorDictModule):
    """A critic whose per-agent values condition on every group's observations.

    Each group's observations ``[*B, n_agents, obs_dim]`` are embedded to
    ``d_model`` by the group's own encoder (``Linear`` + activation); all
    agents' embeddings, flattened, go through one MLP trunk of the same in/out
    width; each agent's slice of the trunk output gives its value through a head
    (one per group, or one shared). ``detach_groups`` stops gradients into the
    embeddings of groups whose policy is not trained (ad-hoc teamwork): their
    observations still inform the others' values.

    Args:
        group_map: group name -> :class:`CrossCriticGroupSpec`, in a fixed order.
        d_model: embedding width per agent.
        trunk_depth: hidden layers of the trunk.
        trunk_cells: width of the trunk's hidden layers.
        activation_class: activation of encoders and trunk.
        share_params: one value head for every group.
        detach_groups: groups whose embeddings are detached.
        device: where the parameters live.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> groups = {
        ...     "a": CrossCriticGroupSpec(3, 2, ("a", "obs"), ("a", "value")),
        ...     "b": CrossCriticGroupSpec(5, 1, ("b", "obs"), ("b", "value")),
        ... }
        >>> critic = CrossGroupCritic(groups, d_model=4, trunk_cells=8)
        >>> td = critic(TensorDict(a={"obs": torch.zeros(7, 2, 3)}, b={"obs": torch.zeros(7, 1, 5)}, batch_size=[7]))
        >>> td["a", "value"].shape, td["b", "value"].shape
        (torch.Size([7, 2, 1]), torch.Size([7, 1, 1]))
    """

    def __init__(
        self,
        group_map: dict[str, CrossCriticGroupSpec],
        *,
        d_model: int = 64,
        trunk_depth: int = 2,
        trunk_cells: int = 256,
        activation_class: type[nn.Module] = nn.Tanh,
        share_params: bool = False,
        detach_groups: Iterable[str] | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        net = CrossGroupNet(
            group_map,
            d_model,
            trunk_depth,
            trunk_cells,
            activation_class,
            share_params,
            detach_groups,
            device,
        )
        super().__init__(
            net,
            in_keys=[spec.obs_key for spec in group_map.values()],
            out_keys=[spec.value_key for spec in group_map.values()],
        )
