"""TD3+BC (Fujimoto and Gu 2021, arXiv:2106.06860): TD3 with a behaviour-cloning actor term."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._nets import make_qvalue_networks, output_of, stacked_outputs, with_params
from rl_objectives._offline import without_shared
from rl_objectives.common import (
    TD_ESTIMATOR_KEYS,
    TD_ESTIMATORS,
    LossModule,
    estimator_keys,
    loss_output,
)
from rl_objectives.td3 import action_bounds
from rl_objectives.utils import distance_loss
from rl_objectives.value.registry import ValueEstimators

__all__ = ["TD3BCLoss"]


class TD3BCLoss(LossModule):
    """TD3+BC: TD3's critics, an actor that trades the critic's value against cloning the data.

    * ``loss_actor = -lmbd * Q_1(s, pi(s)) + mean((pi(s) - a)^2)`` with
      ``lmbd = alpha / mean|Q_1(s, pi(s))|`` (detached; the critics detached too);
    * ``loss_qvalue = sum_i loss(Q_i(s, a), y)``, ``y = r + gamma * (1 - terminated) *
      min_i Q_target_i(s', clip(pi_target(s') + clip(noise), low, high))``.

    The behaviour-cloning term is the mean over the batch and the action dimensions, as in
    the paper and TorchRL. Delaying the actor update is the training loop's business.
    ``td_error`` (max over critics of the squared TD error) is written into the input.

    Args:
        actor_network: deterministic policy writing ``action``.
        qvalue_network: one Q network (copied ``num_qvalue_nets`` times, re-initialised) or a list.
        action_spec: bounded spec-like object (``space.low`` / ``space.high``); give exactly one
            of ``action_spec`` and ``bounds``.
        bounds: ``(low, high)`` of the action.
        num_qvalue_nets: number of critics.
        policy_noise: std of the target policy noise.
        noise_clip: clip of that noise.
        alpha: the paper's ``alpha`` (2.5), the scale of the normalised critic term.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"`` for the critics.
        delay_actor: keep target actor parameters.
        delay_qvalue: keep target critic parameters.
        gamma: discount (else the estimator's default, 0.99).
        priority_key: removed in TorchRL (raises; use ``set_keys(priority=...)``).
        separate_losses: the critic loss does not train parameters shared with the actor.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        deactivate_vmap: TorchRL's switch between vmap and a loop; same values here.
        use_prioritized_weights: weight samples by ``tensor_keys.priority_weight`` when present.
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
        >>> actor = TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh()),
        ...                          ["observation"], ["action"])
        >>> q = TensorDictModule(Q(), ["observation", "action"], ["state_action_value"])
        >>> td = TensorDict({
        ...     "observation": torch.randn(8, 3), "action": torch.rand(8, 2) * 2 - 1,
        ...     ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ...     ("next", "done"): torch.zeros(8, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool)}, batch_size=[8])
        >>> out = TD3BCLoss(actor, q, bounds=(-1.0, 1.0))(td)
        >>> out["loss_actor"].shape, float(out["lmbd"]) > 0
        (torch.Size([]), True)
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`TD3BCLoss` (``priority_weight`` follows docs/contract.md)."""

        action: NestedKey = "action"
        state_action_value: NestedKey = "state_action_value"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        priority_weight: NestedKey = "priority_weight"

    default_keys = _AcceptedKeys
    default_out_keys = (
        "loss_actor", "loss_qvalue", "bc_loss", "lmbd", "pred_value",
        "state_action_value_actor", "next_state_value", "target_value",
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
        alpha: float = 2.5,
        loss_function: str = "smooth_l1",
        delay_actor: bool = True,
        delay_qvalue: bool = True,
        gamma: float | None = None,
        priority_key: NestedKey | None = None,
        separate_losses: bool = False,
        reduction: str | None = None,
        deactivate_vmap: bool = False,
        use_prioritized_weights: str | bool = "auto",
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug)
        self._reject_ctor_keys(priority_key=priority_key)
        low, high = action_bounds(action_spec, bounds, "TD3BCLoss")
        self.convert_to_functional(actor_network, "actor_network", create_target_params=delay_actor)
        qnets = make_qvalue_networks(qvalue_network, num_qvalue_nets)
        self.convert_to_functional(qnets, "qvalue_network", create_target_params=delay_qvalue)
        self.register_buffer("max_action", high)
        self.register_buffer("min_action", low)
        self.num_qvalue_nets = num_qvalue_nets
        self.policy_noise = policy_noise
        self.noise_clip = noise_clip
        self.alpha = alpha
        self.loss_function = loss_function
        self.delay_actor = delay_actor
        self.delay_qvalue = delay_qvalue
        self.gamma = gamma
        self.separate_losses = separate_losses
        self.deactivate_vmap = deactivate_vmap
        self.use_prioritized_weights = use_prioritized_weights

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, TD_ESTIMATOR_KEYS, value="state_action_value")

    def _qs(self, td: TensorDictBase, action: torch.Tensor, params: Any) -> torch.Tensor:
        """``[num_qvalue_nets, *B]`` Q-values of ``action``."""
        key = self.tensor_keys.state_action_value
        qs = stacked_outputs(
            self.qvalue_network, td, key, params, {self.tensor_keys.action: action}
        )
        if qs.shape[1:] != (*td.shape, 1):
            raise ValueError(
                f"TD3BCLoss: the qvalue_network wrote {key!r} with shape {tuple(qs.shape[1:])}, "
                f"expected {(*td.shape, 1)} (one value per sample and action)."
            )
        return qs.squeeze(-1)

    def _policy(self, td: TensorDictBase, params: Any) -> torch.Tensor:
        return output_of(self.actor_network, td, self.tensor_keys.action, params)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Both losses and their diagnostics; writes ``td_error`` into ``tensordict``."""
        keys = self.tensor_keys
        weights = self._weights(tensordict)
        action = self._get(tensordict, "action")
        self._get(tensordict, "reward", under_next=True)
        # actor: normalised critic value plus behaviour cloning
        policy_action = self._policy(tensordict, None)
        if policy_action.shape != action.shape:
            raise ValueError(
                f"TD3BCLoss: the actor wrote {keys.action!r} with shape "
                f"{tuple(policy_action.shape)}, but the data's actions have shape "
                f"{tuple(action.shape)}; they must match."
            )
        # only the first critic scores the policy (detached parameters)
        with with_params(self._bound_params("qvalue_network", target=False), self.qvalue_network):
            q_actor = output_of(
                self.qvalue_network[0], tensordict, keys.state_action_value, None,
                {keys.action: policy_action},
            ).squeeze(-1)  # fmt: skip
        bc_loss = torch.nn.functional.mse_loss(policy_action, action)
        lmbd = self.alpha / q_actor.abs().mean().detach()
        loss_actor = self._reduce(-lmbd * q_actor + bc_loss, weights)
        # critics: clipped double Q with target policy smoothing
        noise = (torch.randn_like(action) * self.policy_noise).clamp(
            -self.noise_clip, self.noise_clip
        )
        with torch.no_grad():
            nxt = tensordict.get("next")
            target_actor = (
                self._bound_params("actor_network", target=True) if self.delay_actor else None
            )
            next_action = (self._policy(nxt, target_actor) + noise).clamp(
                self.min_action, self.max_action
            )
            next_q = self._qs(nxt, next_action, self._bound_params("qvalue_network", target=True))
            next_value = next_q.amin(0)
        target = self.value_estimator.value_estimate(
            tensordict, next_value=next_value.unsqueeze(-1)
        ).squeeze(-1)
        q_params = None
        if self.separate_losses:
            q_params = without_shared(self.network_params("qvalue_network"), [self.actor_network])
        pred = self._qs(tensordict, action, q_params)
        tensordict.set(keys.priority, (pred.detach() - target).pow(2).amax(0))
        loss_q = distance_loss(pred, target.expand_as(pred), self.loss_function).sum(0)
        loss_q = self._reduce(loss_q, weights)
        return loss_output(
            {
                "loss_actor": loss_actor,
                "loss_qvalue": loss_q,
                "bc_loss": bc_loss.detach(),
                "lmbd": lmbd,
                "pred_value": pred.detach().mean(),
                "state_action_value_actor": q_actor.detach().mean(),
                "next_state_value": next_value.mean(),
                "target_value": target.mean(),
            }
        )
