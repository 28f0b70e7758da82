"""The V-trace module (Espeholt et al. 2018, IMPALA, arXiv:1802.01561), a drop-in for ``rl_objectives.VTrace``."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch import nn

from rl_kernels.estimators.common import ValueEstimatorBase, held_out, standardize
from rl_kernels.scans.functional import vtrace_advantage_estimate

__all__ = ["VTrace"]


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
        differentiable: keep the graph through the critic.
        shifted: one critic call (see :class:`~rl_kernels.GAE`).
        time_dim: time dimension of the TensorDict (its last batch dim by default).
        debug: raise on non-finite inputs.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

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
        backend: str = "auto",
    ) -> None:
        super().__init__(
            gamma=gamma,
            value_network=value_network,
            differentiable=differentiable,
            shifted=shifted,
            time_dim=time_dim,
            debug=debug,
            backend=backend,
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
        log_mu = self._get(td, "sample_log_prob")
        with held_out(self.actor_network):  # TorchRL holds the actor out too
            log_pi = self.actor_network.get_dist(td).log_prob(self._get(td, "action"))
        if log_pi.shape != reward.shape:
            log_pi = log_pi.reshape(reward.shape)
        if log_mu.shape != reward.shape:
            log_mu = log_mu.reshape(reward.shape)
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
            backend=self.backend,
        )
        if self.average_adv:
            advantage = standardize(advantage, 1e-4)
        return advantage, target
