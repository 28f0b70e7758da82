"""Multi-agent PPO: MAPPO (centralised critic) and IPPO (local critics).

Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent
Games", arXiv:2103.01955; de Witt et al. 2020, "Is Independent Learning All You
Need in the StarCraft Multi-Agent Challenge?", arXiv:2011.09533.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives.ppo import ClipPPOLoss
from rl_objectives.value.registry import ValueEstimators

__all__ = ["IPPOLoss", "MAPPOLoss"]


class MAPPOLoss(ClipPPOLoss):
    """Clipped PPO for a group of agents, each with its own ratio and advantage.

    The data follows the multi-agent layout of ``VmasEnv`` / ``PettingZooEnv``: a
    TensorDict of batch ``[*B]`` whose group entry (``"agents"``) has batch
    ``[*B, n_agents]`` and holds ``("agents", "observation" / "action" /
    "action_log_prob" / "state_value" / "advantage" / "value_target")``. The loss
    runs :class:`~rl_objectives.ClipPPOLoss` on a view of batch ``[*B, n_agents]``:
    every agent-step is one sample (one importance ratio, one clip, one entropy, one
    critic error), and each loss is the mean over samples and agents. Root entries
    (e.g. a global ``"state"``) are shown to the networks expanded along the agent
    dim (no copy), so a critic on a global state is an MLP giving ``[*B, n_agents, 1]``.

    Differences from :class:`~rl_objectives.ClipPPOLoss` (TorchRL 0.14's):

    - the default estimator is :class:`~rl_objectives.MultiAgentGAE` (team rewards /
      dones broadcast over the agents);
    - ``normalize_advantage=True`` over every dim except the agent dim (``-2``);
    - ``entropy_coeff=0.01``;
    - ``value_norm``: a running normaliser (``rl_modules.PopArtValueNorm`` /
      ``RunningValueNorm``, or any object with ``update`` and ``normalize``); each call
      folds the value targets into it, then the critic regresses the normalised
      prediction on the normalised target (the clip radius of ``clip_value`` is then in
      normalised units).

    The group is read from the action key (``set_keys(action=("agents", "action"))``):
    its prefix names the sub-TensorDict that carries the agent dim. Data already at the
    agent level (the group's batch equal to the root's) is used as it is.

    Args:
        actor_network: per-agent policy with ``get_dist`` (e.g. a ``ProbabilisticActor``
            over ``MultiAgentMLP(centralized=False)``).
        critic_network: centralised value operator writing ``("agents", "state_value")``
            (e.g. ``MultiAgentMLP(centralized=True)``).
        value_norm: optional running value normaliser.
        entropy_coeff: entropy weight.
        normalize_advantage: standardise the advantage.
        normalize_advantage_exclude_dims: dims kept independent (the agent dim).
        **kwargs: :class:`~rl_objectives.ClipPPOLoss` arguments (``clip_epsilon``,
            ``critic_coeff``, ``loss_critic_type``, ``clip_value``, ...).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import (TensorDictModule, ProbabilisticTensorDictModule,
        ...                            ProbabilisticTensorDictSequential)
        >>> actor = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(torch.nn.Linear(4, 5), [("agents", "observation")],
        ...                      [("agents", "logits")]),
        ...     ProbabilisticTensorDictModule([("agents", "logits")], [("agents", "action")],
        ...         distribution_class=torch.distributions.Categorical))
        >>> critic = TensorDictModule(torch.nn.Linear(4, 1), [("agents", "observation")],
        ...                           [("agents", "state_value")])
        >>> loss = MAPPOLoss(actor, critic)
        >>> _ = loss.set_keys(action=("agents", "action"), value=("agents", "state_value"),
        ...     sample_log_prob=("agents", "action_log_prob"), advantage=("agents", "advantage"),
        ...     value_target=("agents", "value_target"))
        >>> agents = TensorDict({"observation": torch.randn(8, 3, 4),
        ...     "action": torch.randint(5, (8, 3)), "action_log_prob": torch.full((8, 3), -1.6),
        ...     "advantage": torch.randn(8, 3, 1), "value_target": torch.randn(8, 3, 1)}, [8, 3])
        >>> out = loss(TensorDict({"agents": agents}, [8]))
        >>> sorted(k for k in out.keys() if k.startswith("loss"))
        ['loss_critic', 'loss_entropy', 'loss_objective']
    """

    default_value_estimator = ValueEstimators.MAGAE

    def __init__(
        self,
        actor_network: nn.Module | None = None,
        critic_network: nn.Module | None = None,
        *,
        value_norm: Any = None,
        entropy_coeff: float | Mapping[NestedKey, float] = 0.01,
        normalize_advantage: bool = True,
        normalize_advantage_exclude_dims: tuple[int, ...] = (-2,),
        **kwargs: Any,
    ) -> None:
        super().__init__(
            actor_network,
            critic_network,
            entropy_coeff=entropy_coeff,
            normalize_advantage=normalize_advantage,
            normalize_advantage_exclude_dims=normalize_advantage_exclude_dims,
            **kwargs,
        )
        if value_norm is not None and not (
            callable(getattr(value_norm, "update", None))
            and callable(getattr(value_norm, "normalize", None))
        ):
            raise TypeError(
                f"{type(self).__name__}: value_norm must offer update(target) and "
                f"normalize(x) (e.g. rl_modules.PopArtValueNorm), got {type(value_norm).__name__}."
            )
        self.value_norm = value_norm

    def _critic_loss_inputs(
        self,
        target_return: torch.Tensor,
        state_value: torch.Tensor,
        old_state_value: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        norm = self.value_norm
        if norm is None:
            return target_return, state_value, old_state_value
        norm.update(target_return.detach())
        old = None if old_state_value is None else norm.normalize(old_state_value)
        return norm.normalize(target_return.detach()), norm.normalize(state_value), old

    # -- the agent-level view ---------------------------------------------------------

    def _group(self) -> tuple[str, ...] | None:
        action = self.tensor_keys.action
        if isinstance(action, tuple) and len(action) > 1:
            return action[:-1]
        return None

    def _group_of(self, td: TensorDictBase) -> TensorDictBase | None:
        """The group's sub-TensorDict (``None`` when the action key names no group)."""
        group = self._group()
        if group is None:
            return None
        sub = td.get(group, None)
        if sub is None:
            raise KeyError(
                f"{type(self).__name__}: the action key {self.tensor_keys.action!r} names the group "
                f"{group!r}, which is not in the input (keys: {list(td.keys())}). Point the loss at "
                "your group with set_keys(action=(<group>, 'action'), ...)."
            )
        return sub

    def _agent_view(self, td: TensorDictBase) -> TensorDictBase:
        """``td`` re-batched to ``[*B, n_agents]`` (the group's batch); root entries expanded."""
        group = self._group()
        if group is None:
            return td
        sub = self._group_of(td)
        batch, agent_batch = td.batch_size, sub.batch_size
        if agent_batch == batch:
            # e.g. a replay-buffer sample whose group lost its batch dims: the per-agent
            # log-probabilities [*B, n_agents] tell whether the data has an agent dim
            log_prob = td.get(self.tensor_keys.sample_log_prob, None)
            if log_prob is None or log_prob.ndim != len(batch) + 1:
                return td
            sub = sub.copy().auto_batch_size_(batch_dims=len(batch) + 1)
            agent_batch = sub.batch_size
        if len(agent_batch) != len(batch) + 1 or agent_batch[: len(batch)] != batch:
            raise ValueError(
                f"{type(self).__name__}: the group {group!r} has batch {list(agent_batch)}; "
                f"expected the root batch {list(batch)} plus one agent dim. Build the group "
                "sub-TensorDict with batch_size=[*B, n_agents]."
            )
        view = TensorDict(batch_size=agent_batch, device=td.device)
        view.set(group, sub)
        dim = len(batch)
        # the estimator's outputs are [*B, 1], or [*B, n_agents, 1] when it ran per agent
        per_agent = {self.tensor_keys.advantage, self.tensor_keys.value_target}
        for key, value in td.items():
            if key in ("next", group[0]) or _other_group(value, dim):
                continue  # transitions' next steps and other groups are not needed
            if key in per_agent and value.ndim == dim + 2 and value.shape[: dim + 1] == agent_batch:
                view.set(key, value)
                continue
            value = value.unsqueeze(dim)
            view.set(key, value.expand(*agent_batch, *value.shape[dim + 1 :]))
        if len(group) > 1:  # siblings of a nested group
            parent = td.get(group[:-1])
            for key, value in parent.items():
                if key == group[-1] or _other_group(value, dim):
                    continue
                value = value.unsqueeze(dim)
                view.set((*group[:-1], key), value.expand(*agent_batch, *value.shape[dim + 1 :]))
        return view

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute the losses over every agent-step.

        Without an advantage in the input, the value estimator computes it (on a shallow
        copy: the caller's data is not modified) before the agent-level view is built.

        Returns:
            ``loss_objective``, ``loss_entropy``, ``loss_critic`` and ClipPPOLoss's diagnostics.
        """
        td = tensordict
        self._group_of(td)  # a missing group is named before the estimator looks for rewards
        if td.get(self.tensor_keys.advantage, None) is None and self.critic_network is not None:
            td = td.copy()
            estimator = self.value_estimator
            params = (
                self.detached_params("critic_network")
                if getattr(estimator, "differentiable", False)
                else None
            )
            estimator(td, params=params)
        return super().forward(self._agent_view(td))


def _other_group(value: Any, batch_ndim: int) -> bool:
    """A sub-TensorDict with more batch dims than the root: another group, left out of the view."""
    return isinstance(value, TensorDictBase) and value.batch_dims != batch_ndim


class IPPOLoss(MAPPOLoss):
    """Independent PPO: :class:`MAPPOLoss` with each agent's critic on its own observation.

    The loss is the same; what differs is the critic you give it, e.g.
    ``MultiAgentMLP(centralized=False, share_params=True)`` over
    ``("agents", "observation")``. The separate class names the algorithm you run.

    Args:
        actor_network: per-agent policy.
        critic_network: per-agent (decentralised) value operator.
        **kwargs: :class:`MAPPOLoss` arguments.

    Examples:
        >>> import torch
        >>> from tensordict.nn import (TensorDictModule, ProbabilisticTensorDictModule,
        ...                            ProbabilisticTensorDictSequential)
        >>> actor = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(torch.nn.Linear(4, 5), [("agents", "observation")],
        ...                      [("agents", "logits")]),
        ...     ProbabilisticTensorDictModule([("agents", "logits")], [("agents", "action")],
        ...         distribution_class=torch.distributions.Categorical))
        >>> critic = TensorDictModule(torch.nn.Linear(4, 1), [("agents", "observation")],
        ...                           [("agents", "state_value")])
        >>> IPPOLoss(actor, critic).normalize_advantage_exclude_dims
        (-2,)
    """
