"""TD(0), TD(1) and TD(lambda) estimator modules (Sutton & Barto 2018, ch. 6, 7 and 12)."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from rl_objectives.value.common import ValueEstimatorBase, standardize_all
from rl_objectives.value.functional import (
    td0_return_estimate,
    td_lambda_return_estimate,
)
from rl_objectives.value.registry import ValueEstimators, register_value_estimator

__all__ = ["TD0Estimator", "TD1Estimator", "TDLambdaEstimator"]


class _TDBase(ValueEstimatorBase):
    """Shared constructor: ``average_rewards`` standardises rewards before estimating."""

    def __init__(
        self,
        *,
        gamma: float | torch.Tensor,
        value_network: nn.Module | None = None,
        average_rewards: bool = False,
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
        self.average_rewards = average_rewards

    def _needs_state_value(self) -> bool:
        return False

    def _returns(
        self,
        next_value: torch.Tensor,
        reward: torch.Tensor,
        done: torch.Tensor,
        terminated: torch.Tensor,
        time_dim: int,
    ) -> torch.Tensor:
        raise NotImplementedError

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
        target = self._target(td, next_value, reward, done, terminated, time_dim)
        return target - value, target

    def _target(self, td, next_value, reward, done, terminated, time_dim):
        # the returns do not read V(s): no zero state value to build, no advantage to discard
        if self.average_rewards:
            reward = standardize_all(reward, 1e-5)
        return self._returns(next_value, reward, done, terminated, time_dim)


@register_value_estimator(ValueEstimators.TD0, default_kwargs={"gamma": 0.99})
class TD0Estimator(_TDBase):
    """One-step bootstrapped target ``r + gamma * (1 - terminated) * V(s')``.

    Args:
        gamma: discount factor.
        value_network: critic (``None``: ``("next", value)`` is read from the data).
        average_rewards: standardise rewards first.
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
        >>> td = TensorDict({
        ...     "state_value": torch.zeros(4, 1),
        ...     ("next", "state_value"): torch.ones(4, 1),
        ...     ("next", "reward"): torch.ones(4, 1),
        ...     ("next", "done"): torch.zeros(4, 1, dtype=torch.bool),
        ... }, batch_size=[4])
        >>> TD0Estimator(gamma=0.5)(td)["value_target"].squeeze(-1)
        tensor([1.5000, 1.5000, 1.5000, 1.5000])
    """

    one_step = True

    def _returns(self, next_value, reward, done, terminated, time_dim):
        return td0_return_estimate(self.gamma, next_value, reward, terminated)


@register_value_estimator(ValueEstimators.TD1, default_kwargs={"gamma": 0.99})
class TD1Estimator(_TDBase):
    """Monte-Carlo return, bootstrapped at truncations and at the end of the batch.

    Same arguments as :class:`TD0Estimator`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({
        ...     "state_value": torch.zeros(3, 1),
        ...     ("next", "state_value"): torch.zeros(3, 1),
        ...     ("next", "reward"): torch.ones(3, 1),
        ...     ("next", "done"): torch.zeros(3, 1, dtype=torch.bool),
        ... }, batch_size=[3])
        >>> TD1Estimator(gamma=1.0)(td)["value_target"].squeeze(-1)
        tensor([3., 2., 1.])
    """

    def _returns(self, next_value, reward, done, terminated, time_dim):
        return td_lambda_return_estimate(
            self.gamma, 1.0, next_value, reward, done, terminated, time_dim=time_dim
        )


@register_value_estimator(ValueEstimators.TDLambda, default_kwargs={"gamma": 0.99, "lmbda": 0.95})
class TDLambdaEstimator(_TDBase):
    """TD(lambda) return.

    Args:
        gamma: discount factor.
        lmbda: lambda.
        value_network: critic (``None``: ``("next", value)`` is read from the data).
        average_rewards: standardise rewards first.
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
        **options: Any,
    ) -> None:
        super().__init__(
            gamma=gamma,
            value_network=value_network,
            average_rewards=average_rewards,
            differentiable=differentiable,
            shifted=shifted,
            time_dim=time_dim,
            debug=debug,
            **options,
        )
        self.lmbda = lmbda

    def _returns(self, next_value, reward, done, terminated, time_dim):
        return td_lambda_return_estimate(
            self.gamma, self.lmbda, next_value, reward, done, terminated, time_dim=time_dim
        )
