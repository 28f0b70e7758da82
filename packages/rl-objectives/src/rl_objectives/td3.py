"""TD3 (Fujimoto et al. 2018, arXiv:1802.09477)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._nets import (
    BoundParams,
    call,
    make_qvalue_networks,
    stacked_outputs,
    unshare_from,
)
from rl_objectives._offline import action_leaf_spec
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


def action_bounds(
    action_spec: Any, bounds: Any, owner: str = "TD3Loss"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(low, high)`` of the action from exactly one of ``action_spec`` and ``bounds``.

    ``action_spec`` is a bounded spec-like object (``space.low`` / ``space.high``) or a
    Composite holding one at ``"action"`` (e.g. an actor's ``spec``), as TorchRL's TD3 losses.

    Examples:
        >>> action_bounds(None, (-1.0, 1.0))
        (tensor(-1.), tensor(1.))
    """
    if (action_spec is None) == (bounds is None):
        raise ValueError(
            f"{owner}: pass exactly one of action_spec and bounds, but not both or none. "
            f"Got bounds={bounds} and action_spec={action_spec}."
        )
    if bounds is not None:
        low, high = bounds
    else:
        leaf, _ = action_leaf_spec(action_spec, "action")
        action_spec = leaf if leaf is not None else action_spec
        space = getattr(action_spec, "space", None)
        low, high = getattr(space, "low", None), getattr(space, "high", None)
        if low is None or high is None:
            raise ValueError(
                f"{owner}: action_spec is not of type Bounded but {type(action_spec).__name__} "
                "(no space.low / space.high); pass a bounded spec or bounds=(low, high)."
            )
    low = torch.as_tensor(low, dtype=torch.get_default_dtype())
    high = torch.as_tensor(high, dtype=low.dtype, device=low.device)
    if (low > high).any():
        raise ValueError(f"{owner}: Got a low bound higher than a high bound.")
    return low, high


class TD3Loss(LossModule):
    """Twin delayed DDPG: clipped double Q-learning with target policy smoothing.

    ``loss_actor = -Q_1(s, pi(s))`` (critics detached); ``loss_qvalue = sum_i loss(Q_i(s, a), y)``
    with ``y = r + gamma * min_i Q_target_i(s', clip(pi_target(s') + clip(noise), low, high))``.
    Delaying the actor update is the training loop's business (call the actor optimizer every
    ``d`` steps), as in TorchRL.

    Args:
        actor_network: TensorDict module writing ``action``.
        qvalue_network: one Q network (copied ``num_qvalue_nets`` times, re-initialised) or a list.
        action_spec: bounded spec-like object (``space.low`` / ``space.high``) or a Composite
            with one at ``"action"`` (an actor's ``spec``); give exactly one of it and ``bounds``.
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
        separate_losses: the Q-value loss does not train parameters the critics share with the
            actor (they show detached in ``qvalue_network_params``); without it the critics
            get their own copy of such a trunk, as TorchRL's expanded critics.
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
        priority_weight: NestedKey = "priority_weight"

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
        separate_losses: bool = False,
        deactivate_vmap: bool = False,
        value_estimator: ValueEstimatorLike = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug, value_estimator=value_estimator)
        self._reject_ctor_keys(priority_key=priority_key)
        self.deactivate_vmap = deactivate_vmap
        low, high = action_bounds(action_spec, bounds)
        self.register_buffer("min_action", low)
        self.register_buffer("max_action", high)
        self.convert_to_functional(actor_network, "actor_network", create_target_params=delay_actor)
        qnets = make_qvalue_networks(qvalue_network, num_qvalue_nets)
        self.separate_losses = separate_losses
        if not separate_losses:
            qnets = unshare_from(qnets, actor_network)
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
        pred = self._qs(tensordict, action, self._own_params("qvalue_network"))
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
