"""The GAE estimator module (Schulman et al. 2016, arXiv:1506.02438)."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from rl_objectives.value.common import ValueEstimatorBase, standardize_all
from rl_objectives.value.functional import generalized_advantage_estimate
from rl_objectives.value.registry import ValueEstimators, register_value_estimator

__all__ = ["GAE"]


@register_value_estimator(ValueEstimators.GAE, default_kwargs={"gamma": 0.99, "lmbda": 0.95})
class GAE(ValueEstimatorBase):
    """Generalized advantage estimation over ``[*B, T]`` TensorDicts.

    Args:
        gamma: discount factor.
        lmbda: GAE lambda.
        value_network: critic writing ``state_value`` (``None``: values are read from the data).
        average_gae: standardise the advantage (zero mean, unit std) after computing it.
        differentiable: keep the graph through the inputs (never into the networks' parameters).
        shifted: one critic call on the observations plus the few next observations
            that are not the following root observation (done and last steps).
        time_dim: time dimension of the TensorDict (its last batch dim by default).
        vectorized: TorchRL's choice between its vectorised and looped GAE; one implementation
            (a scan) runs here, so the values are the same either way.
        **options: the critic-call options of
            :class:`~rl_objectives.value.common.ValueEstimatorBase` (``skip_existing``,
            ``value_chunk_size``, ``num_chunks``, ``value_chunk_dim``, ``deactivate_vmap``).
        debug: raise on non-finite rewards or values.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> critic = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["state_value"])
        >>> td = TensorDict({
        ...     "observation": torch.randn(2, 5, 3),
        ...     ("next", "observation"): torch.randn(2, 5, 3),
        ...     ("next", "reward"): torch.randn(2, 5, 1),
        ...     ("next", "done"): torch.zeros(2, 5, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(2, 5, 1, dtype=torch.bool),
        ... }, batch_size=[2, 5])
        >>> GAE(gamma=0.99, lmbda=0.95, value_network=critic)(td)["advantage"].shape
        torch.Size([2, 5, 1])
    """

    def __init__(
        self,
        *,
        gamma: float | torch.Tensor,
        lmbda: float | torch.Tensor,
        value_network: nn.Module | None = None,
        average_gae: bool = False,
        vectorized: bool = True,
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
        self.lmbda = lmbda
        self.average_gae = average_gae
        self.vectorized = vectorized

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
        advantage, target = generalized_advantage_estimate(
            self.gamma, self.lmbda, value, next_value, reward, done, terminated, time_dim=time_dim
        )
        if self.average_gae:
            advantage = standardize_all(advantage, 1e-4)
        return advantage, target
