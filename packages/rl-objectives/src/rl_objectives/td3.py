"""TD3 (Fujimoto et al. 2018, arXiv:1802.09477)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._nets import BoundParams, call, make_qvalue_networks, stacked_outputs
from rl_objectives.common import (
    TD_ESTIMATOR_KEYS,
    TD_ESTIMATORS,
    LossModule,
    ValueEstimatorLike,
    estimator_keys,
    loss_output,
)
from rl_objectives.functional import clipped_double_q, distance_loss, smoothed_target_action
from rl_objectives.value.registry import ValueEstimators

__all__ = ["TD3Loss"]


def _bounds(action_spec: Any, bounds: tuple[Any, Any] | None) -> tuple[torch.Tensor, torch.Tensor]:
    if bounds is not None:
        low, high = bounds
    elif action_spec is not None:
        space = getattr(action_spec, "space", action_spec)
        low, high = getattr(space, "low", None), getattr(space, "high", None)
        if low is None or high is None:
            raise ValueError(
                "TD3Loss: the action_spec has no space.low / space.high; pass a bounded spec "
                "or bounds=(low, high)."
            )
    else:
        raise ValueError("TD3Loss needs the action bounds: pass action_spec or bounds=(low, high).")
    return torch.as_tensor(low, dtype=torch.float32), torch.as_tensor(high, dtype=torch.float32)


class TD3Loss(LossModule):
    """Twin delayed DDPG: clipped double Q-learning with target policy smoothing.

    ``loss_actor = -Q_1(s, pi(s))`` (critics detached); ``loss_qvalue = sum_i loss(Q_i(s, a), y)``
    with ``y = r + gamma * min_i Q_target_i(s', clip(pi_target(s') + clip(noise), low, high))``.
    Delaying the actor update is the training loop's business (call the actor optimizer every
    ``d`` steps), as in TorchRL.

    Args:
        actor_network: TensorDict module writing ``action``.
        qvalue_network: one Q network (copied ``num_qvalue_nets`` times, re-initialised) or a list.
        action_spec: spec-like object with ``space.low`` / ``space.high`` (or give ``bounds``).
        bounds: ``(low, high)`` of the action.
        num_qvalue_nets: number of critics.
        policy_noise: std of the target policy noise.
        noise_clip: clip of that noise.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        delay_actor: keep target actor parameters.
        delay_qvalue: keep target critic parameters.
        gamma: discount (else the estimator's default, 0.99).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        use_prioritized_weights: weight samples by ``tensor_keys.priority_weight`` when present.
        priority_key: removed in TorchRL (raises; use ``set_keys(priority=...)``).
        deactivate_vmap: TorchRL's switch between vmap and a loop over critics; the
            values are the same either way (critics run stacked here).
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
        >>> q = TensorDictModule(Q(), ["observation", "action"], ["state_action_value"])
        >>> td = TensorDict({
        ...     "observation": torch.randn(8, 3), "action": torch.rand(8, 2) * 2 - 1,
        ...     ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ...     ("next", "done"): torch.zeros(8, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool)}, batch_size=[8])
        >>> out = TD3Loss(actor, q, bounds=(-1.0, 1.0))(td)
        >>> out["loss_actor"].shape, out["loss_qvalue"].shape
        (torch.Size([]), torch.Size([]))
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`TD3Loss`."""

        action: NestedKey = "action"
        state_action_value: NestedKey = "state_action_value"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        priority_weight: NestedKey = "_weight"

    default_keys = _AcceptedKeys
    default_out_keys = (
        "loss_actor", "loss_qvalue", "pred_value", "state_action_value_actor",
        "next_state_value", "target_value",
    )  # fmt: skip
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = TD_ESTIMATORS

    def __init__(
        self,
        actor_network: nn.Module,
        qvalue_network: nn.Module | list[nn.Module],
        *,
        action_spec: Any = None,
        bounds: tuple[Any, Any] | None = None,
        num_qvalue_nets: int = 2,
        policy_noise: float = 0.2,
        noise_clip: float = 0.5,
        loss_function: str = "smooth_l1",
        delay_actor: bool = True,
        delay_qvalue: bool = True,
        gamma: float | None = None,
        reduction: str | None = None,
        use_prioritized_weights: str | bool = "auto",
        priority_key: NestedKey | None = None,
        deactivate_vmap: bool = False,
        value_estimator: ValueEstimatorLike = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug, value_estimator=value_estimator)
        self._reject_ctor_keys(priority_key=priority_key)
        self.deactivate_vmap = deactivate_vmap
        low, high = _bounds(action_spec, bounds)
        self.register_buffer("min_action", low)
        self.register_buffer("max_action", high)
        self.convert_to_functional(actor_network, "actor_network", create_target_params=delay_actor)
        qnets = make_qvalue_networks(qvalue_network, num_qvalue_nets)
        self.convert_to_functional(qnets, "qvalue_network", create_target_params=delay_qvalue)
        self.num_qvalue_nets = num_qvalue_nets
        self.policy_noise = policy_noise
        self.noise_clip = noise_clip
        self.loss_function = loss_function
        self.delay_actor = delay_actor
        self.delay_qvalue = delay_qvalue
        self.gamma = gamma
        self.use_prioritized_weights = use_prioritized_weights

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, TD_ESTIMATOR_KEYS, value="state_action_value")

    def _qs(
        self, td: TensorDictBase, action: torch.Tensor, params: TensorDictBase | BoundParams | None
    ) -> torch.Tensor:
        """``[num_qvalue_nets, *B]`` Q-values of ``action``."""
        keys = self.tensor_keys
        overrides = {keys.action: action}
        return stacked_outputs(
            self.qvalue_network, td, keys.state_action_value, params, overrides
        ).squeeze(-1)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute both losses; writes ``td_error`` (max over critics) into ``tensordict``."""
        keys = self.tensor_keys
        weights = self._weights(tensordict)
        action = self._get(tensordict, "action")
        self._get(tensordict, "reward", under_next=True)
        # actor: first critic, detached parameters
        new_action = call(self.actor_network, tensordict).get(keys.action)
        q_actor = self._qs(
            tensordict, new_action, self._bound_params("qvalue_network", target=False)
        )
        loss_actor = self._reduce(-q_actor[0], weights)
        # critics
        with torch.no_grad():
            nxt = tensordict.get("next")
            next_action = call(
                self.actor_network, nxt, self._bound_params("actor_network", target=True)
            ).get(keys.action)
            noise = torch.randn_like(next_action) * self.policy_noise
            next_action = smoothed_target_action(
                next_action, noise, self.noise_clip, self.min_action, self.max_action
            )
            next_q = self._qs(nxt, next_action, self._bound_params("qvalue_network", target=True))
            next_value = clipped_double_q(next_q).unsqueeze(-1)
        target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        pred = self._qs(tensordict, action, None)
        td_error = (pred - target).detach().pow(2)
        tensordict.set(keys.priority, td_error.max(0).values)
        loss_q = distance_loss(pred, target.expand_as(pred), self.loss_function).sum(0)
        loss_q = self._reduce(loss_q, weights)
        return loss_output(
            {
                "loss_actor": loss_actor,
                "loss_qvalue": loss_q,
                "state_action_value_actor": q_actor.detach().mean(),
                "pred_value": pred.detach().mean(),
                "target_value": target.mean(),
                "next_state_value": next_value.mean(),
            }
        )
