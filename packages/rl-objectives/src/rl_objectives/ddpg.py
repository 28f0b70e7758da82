"""DDPG (Lillicrap et al. 2016, arXiv:1509.02971)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._nets import BoundParams, call, output_of
from rl_objectives.common import (
    TD_ESTIMATOR_KEYS,
    TD_ESTIMATORS,
    LossModule,
    ValueEstimatorLike,
    estimator_keys,
    loss_output,
)
from rl_objectives.functional import distance_loss
from rl_objectives.value.registry import ValueEstimators

__all__ = ["DDPGLoss"]


class DDPGLoss(LossModule):
    """Deterministic policy gradient with a Q critic.

    ``loss_actor = -Q(s, pi(s))`` (the critic's parameters are detached there) and
    ``loss_value = loss(Q(s, a), r + gamma * Q_target(s', pi_target(s')))``.

    Args:
        actor_network: TensorDict module writing ``action``.
        value_network: TensorDict module reading observations and ``action``, writing
            ``state_action_value``.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        delay_actor: keep target actor parameters.
        delay_value: keep target critic parameters.
        gamma: discount (else the estimator's default, 0.99).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        use_prioritized_weights: weight samples by ``tensor_keys.priority_weight`` when present.
        separate_losses: the value loss does not train parameters the critic shares with the
            actor (they show detached in ``value_network_params``).
        value_estimator: the value estimator: a ready estimator module, a
            :class:`~rl_objectives.value.ValueEstimators` member or its name (default:
            ``"td0"``); built on first use, with this loss's ``gamma``.
        debug: raise on non-finite inputs.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> class Q(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.lin = torch.nn.Linear(5, 1)
        ...     def forward(self, obs, act):
        ...         return self.lin(torch.cat([obs, act], -1))
        >>> actor = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action"])
        >>> critic = TensorDictModule(Q(), ["observation", "action"], ["state_action_value"])
        >>> td = TensorDict({
        ...     "observation": torch.randn(8, 3), "action": torch.randn(8, 2),
        ...     ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ...     ("next", "done"): torch.zeros(8, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool)}, batch_size=[8])
        >>> out = DDPGLoss(actor, critic)(td)
        >>> sorted(k for k in out.keys() if k.startswith("loss"))
        ['loss_actor', 'loss_value']
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`DDPGLoss`."""

        state_action_value: NestedKey = "state_action_value"
        action: NestedKey = "action"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        priority_weight: NestedKey = "priority_weight"

    default_keys = _AcceptedKeys
    default_out_keys = (
        "loss_actor", "loss_value", "pred_value", "target_value", "pred_value_max",
        "target_value_max",
    )  # fmt: skip
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = TD_ESTIMATORS

    def __init__(
        self,
        actor_network: nn.Module,
        value_network: nn.Module,
        *,
        loss_function: str = "l2",
        delay_actor: bool = False,
        delay_value: bool = True,
        gamma: float | None = None,
        reduction: str | None = None,
        use_prioritized_weights: str | bool = "auto",
        separate_losses: bool = False,
        value_estimator: ValueEstimatorLike = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug, value_estimator=value_estimator)
        self.separate_losses = separate_losses
        self.convert_to_functional(actor_network, "actor_network", create_target_params=delay_actor)
        self.convert_to_functional(value_network, "value_network", create_target_params=delay_value)
        self.loss_function = loss_function
        self.delay_actor = delay_actor
        self.delay_value = delay_value
        self.gamma = gamma
        self.use_prioritized_weights = use_prioritized_weights

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, TD_ESTIMATOR_KEYS, value="state_action_value")

    def _q(
        self, td: TensorDictBase, action: torch.Tensor, params: TensorDictBase | BoundParams | None
    ) -> torch.Tensor:
        keys = self.tensor_keys
        return output_of(
            self.value_network, td, keys.state_action_value, params, {keys.action: action}
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute both losses; writes ``td_error`` into ``tensordict``.

        Returns:
            ``loss_actor``, ``loss_value``, the detached per-sample ``pred_value``,
            ``target_value`` and ``td_error`` (``[*batch]``, as TorchRL), and the scalars
            ``pred_value_max``, ``target_value_max``.
        """
        keys = self.tensor_keys
        weights = self._weights(tensordict)
        self._get(tensordict, "reward", under_next=True)
        # actor: the critic runs on detached parameters, so only the actor gets gradients
        action = call(self.actor_network, tensordict).get(keys.action)
        q_actor = self._q(tensordict, action, self._bound_params("value_network", target=False))
        loss_actor = self._reduce(-q_actor.squeeze(-1), weights)
        # critic
        action_in = self._get(tensordict, "action")
        pred = self._q(tensordict, action_in, self._own_params("value_network")).squeeze(-1)
        with torch.no_grad():
            nxt = tensordict.get("next")
            next_action = call(
                self.actor_network, nxt, self._bound_params("actor_network", target=True)
            ).get(keys.action)
            next_value = self._q(nxt, next_action, self._bound_params("value_network", target=True))
        target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        td_error = (pred - target).detach().pow(2)
        tensordict.set(keys.priority, td_error)
        loss_value = self._reduce(distance_loss(pred, target, self.loss_function), weights)
        pred_d = pred.detach()
        return loss_output(
            {
                "loss_actor": loss_actor,
                "loss_value": loss_value,
                "pred_value": pred_d,
                "target_value": target,
                "pred_value_max": pred_d.max(),
                "target_value_max": target.max(),
                "td_error": td_error,
            }
        )
