"""The TD(lambda) module (Sutton & Barto 2018, ch. 12), a drop-in for ``rl_objectives.TDLambdaEstimator``."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch import nn

from rl_kernels.estimators.common import ValueEstimatorBase, standardize
from rl_kernels.scans.functional import td_lambda_return_estimate

__all__ = ["TDLambdaEstimator"]


class TDLambdaEstimator(ValueEstimatorBase):
    """TD(lambda) returns as ``value_target``, minus ``state_value`` as ``advantage``.

    Args:
        gamma: discount factor.
        lmbda: lambda.
        value_network: critic (``None``: values are read from the data).
        average_rewards: standardise rewards first.
        differentiable: keep the graph through the critic.
        shifted: one critic call (see :class:`~rl_kernels.GAE`).
        time_dim: time dimension of the TensorDict (its last batch dim by default).
        debug: raise on non-finite inputs.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({
        ...     "state_value": torch.zeros(2, 1),
        ...     ("next", "state_value"): torch.ones(2, 1),
        ...     ("next", "reward"): torch.zeros(2, 1),
        ...     ("next", "done"): torch.zeros(2, 1, dtype=torch.bool),
        ... }, batch_size=[2])
        >>> TDLambdaEstimator(gamma=1.0, lmbda=0.5)(td)["value_target"].squeeze(-1)
        tensor([1., 1.])
    """

    def __init__(
        self,
        *,
        gamma: float | torch.Tensor,
        lmbda: float | torch.Tensor,
        value_network: nn.Module | None = None,
        average_rewards: bool = False,
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
        self.lmbda = lmbda
        self.average_rewards = average_rewards

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
        if self.average_rewards:
            reward = standardize(reward, 1e-5)
        target = td_lambda_return_estimate(
            self.gamma,
            self.lmbda,
            next_value,
            reward,
            done,
            terminated,
            time_dim=time_dim,
            backend=self.backend,
        )
        return target - value, target
