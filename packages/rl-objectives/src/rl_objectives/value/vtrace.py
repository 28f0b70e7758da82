"""The V-trace estimator module (Espeholt et al. 2018, IMPALA, arXiv:1802.01561)."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from rl_objectives._pg import log_prob_of, prev_log_prob, sum_leaves
from rl_objectives.value.common import ValueEstimatorBase, held_out, standardize_all
from rl_objectives.value.functional import vtrace_advantage_estimate
from rl_objectives.value.registry import ValueEstimators, register_value_estimator

__all__ = ["VTrace"]


@register_value_estimator(ValueEstimators.VTrace, default_kwargs={"gamma": 0.99})
class VTrace(ValueEstimatorBase):
    """Off-policy corrected advantages and value targets.

    The learner's log-probabilities come from ``actor_network.get_dist(td).log_prob(action)``;
    the behaviour ones from ``tensor_keys.sample_log_prob`` in the data.

    Args:
        gamma: discount factor.
        actor_network: the learner policy; must offer ``get_dist(td)``.
        value_network: critic (``None``: values are read from the data).
        rho_thresh: truncation of the importance weights in the TD errors.
        c_thresh: truncation of the traces.
        average_adv: standardise the advantage.
        differentiable: keep the graph through the inputs (never into the networks' parameters).
        shifted: one critic call (see :class:`~rl_objectives.value.GAE`).
        time_dim: time dimension of the TensorDict.
        **options: the critic-call options of
            :class:`~rl_objectives.value.common.ValueEstimatorBase` (``skip_existing``,
            ``value_chunk_size``, ``num_chunks``, ``value_chunk_dim``, ``deactivate_vmap``).
        debug: raise on non-finite inputs.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule, ProbabilisticTensorDictModule
        >>> from tensordict.nn import ProbabilisticTensorDictSequential
        >>> actor = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["logits"]),
        ...     ProbabilisticTensorDictModule(["logits"], ["action"],
        ...                                   distribution_class=torch.distributions.Categorical))
        >>> td = TensorDict({
        ...     "observation": torch.randn(5, 3), "action": torch.randint(2, (5,)),
        ...     "action_log_prob": torch.full((5, 1), -0.7),
        ...     "state_value": torch.zeros(5, 1), ("next", "state_value"): torch.zeros(5, 1),
        ...     ("next", "reward"): torch.ones(5, 1),
        ...     ("next", "done"): torch.zeros(5, 1, dtype=torch.bool),
        ... }, batch_size=[5])
        >>> VTrace(gamma=0.9, actor_network=actor)(td)["advantage"].shape
        torch.Size([5, 1])
    """

    def __init__(
        self,
        *,
        gamma: float | torch.Tensor,
        actor_network: nn.Module,
        value_network: nn.Module | None = None,
        rho_thresh: float = 1.0,
        c_thresh: float = 1.0,
        average_adv: bool = False,
        differentiable: bool = False,
        shifted: bool = False,
        time_dim: int | None = None,
        debug: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(
            gamma=gamma,
            value_network=value_network,
            differentiable=differentiable,
            shifted=shifted,
            time_dim=time_dim,
            debug=debug,
            **options,
        )
        if not hasattr(actor_network, "get_dist"):
            raise TypeError(
                "VTrace needs an actor_network with get_dist(td) (e.g. a "
                f"ProbabilisticTensorDictSequential); got {type(actor_network).__name__}."
            )
        # held outside the module tree: the loss owns and registers the actor
        self.__dict__["actor_network"] = actor_network
        if rho_thresh < c_thresh:
            raise ValueError(
                f"V-trace needs rho_thresh >= c_thresh, got {rho_thresh} < {c_thresh}."
            )
        self.rho_thresh = rho_thresh
        self.c_thresh = c_thresh
        self.average_adv = average_adv

    @classmethod
    def for_loss(cls, loss: nn.Module, *, value_network: nn.Module | None, **kwargs: Any):
        """Build with the loss's actor (``loss.actor_network``)."""
        actor = getattr(loss, "actor_network", None)
        if actor is None:
            raise ValueError(f"V-trace needs an actor network; {type(loss).__name__} has none.")
        return cls(value_network=value_network, actor_network=actor, **kwargs)

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
        with held_out(self.actor_network):
            dist = self.actor_network.get_dist(td)
            # a composite distribution scores the whole TensorDict (its heads' actions)
            log_pi, heads = log_prob_of(dist, td, self.tensor_keys.action, td.ndim)
        key = self.tensor_keys.sample_log_prob
        if isinstance(key, list):  # TorchRL's per-head keys of a composite policy
            log_mu = sum(sum_leaves(td.select(k), td.ndim) for k in key)
        else:
            log_mu = prev_log_prob(td, key, heads, td.ndim, type(self).__name__)
        log_pi, log_mu = log_pi.reshape(reward.shape), log_mu.reshape(reward.shape)
        advantage, target = vtrace_advantage_estimate(
            self.gamma,
            log_pi,
            log_mu,
            value,
            next_value,
            reward,
            done,
            terminated,
            self.rho_thresh,
            self.c_thresh,
            time_dim=time_dim,
        )
        if self.average_adv:
            advantage = standardize_all(advantage, 1e-4)
        return advantage, target
