"""SAC for continuous actions (Haarnoja et al. 2018, arXiv:1801.01290 and arXiv:1812.05905)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._alpha import Temperature, sum_to_batch
from rl_objectives._nets import (
    BoundParams,
    dist_of,
    make_qvalue_networks,
    output_of,
    stacked_outputs,
    unshare_from,
)
from rl_objectives._offline import assemble_output, resolve_scalar_mode, target_entropy_from
from rl_objectives.common import (
    TD_ESTIMATOR_KEYS,
    TD_ESTIMATORS,
    LossModule,
    ValueEstimatorLike,
    estimator_keys,
)
from rl_objectives.functional import (
    clipped_double_q,
    distance_loss,
    soft_policy_loss,
    soft_state_value,
    temperature_loss,
)
from rl_objectives.value.registry import ValueEstimators

__all__ = ["SACLoss"]


class SACLoss(LossModule):
    """Soft actor-critic: without a state-value network ("SAC v2"), or with one ("SAC v1").

    * ``loss_qvalue = sum_i loss(Q_i(s, a), y)``, ``y = r + gamma * (min_i Q_target_i(s', a') -
      alpha * log pi(a' | s'))`` with ``a' ~ pi(s')``;
    * ``loss_actor = alpha * log pi(a~ | s) - min_i Q_i(s, a~)``, ``a~`` reparameterised, critics
      detached;
    * ``loss_alpha = -log_alpha * (log pi(a~ | s) + target_entropy)`` (only moves alpha).

    With a ``value_network`` V (SAC v1, arXiv:1801.01290), as TorchRL:

    * the batch is split in ``num_qvalue_nets`` contiguous chunks, critic ``i`` regresses
      chunk ``i`` on ``y = r + gamma * V_target(s')``;
    * ``loss_value = loss(V(s), min_i Q_target_i(s, a') - alpha * log pi_target(a' | s))``,
      ``a' ~ pi_target(s)`` (the actor's target, or detached, parameters).

    The actor must offer ``get_dist(td)`` returning a distribution with ``rsample``
    (e.g. ``ProbabilisticTensorDictSequential`` with a tanh-normal).

    Args:
        actor_network: the policy.
        qvalue_network: one Q network (copied, re-initialised) or a list of ``num_qvalue_nets``.
        value_network: optional state-value network writing ``state_value`` (SAC v1).
        num_qvalue_nets: number of critics.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        alpha_init: initial temperature.
        min_alpha: lower clamp of alpha.
        max_alpha: upper clamp of alpha.
        action_spec: spec-like object; its ``shape`` gives ``target_entropy="auto"``.
        fixed_alpha: do not learn alpha.
        target_entropy: a float, or ``"auto"`` for ``-prod(action shape)`` (taken from
            ``action_spec``, else from the first batch's actions).
        delay_actor: keep target actor parameters (used for the next action).
        delay_qvalue: keep target critic parameters.
        delay_value: keep target parameters of ``value_network`` (SAC v1).
        gamma: discount (else the estimator's default, 0.99).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        use_prioritized_weights: weight samples by ``tensor_keys.priority_weight`` when present.
        priority_key: removed in TorchRL (raises; use ``set_keys(priority=...)``).
        skip_done_states: TorchRL's hint to skip the actor on done next states; the
            targets are the same either way (done states are masked), all are computed here.
        separate_losses: the Q-value loss does not train parameters the critics share with the
            actor (they show detached in ``qvalue_network_params``); without it the critics
            get their own copy of such a trunk, as TorchRL's expanded critics.
        deactivate_vmap: TorchRL's switch between vmap and a loop over critics; the
            values are the same either way (critics run stacked here).
        value_estimator: the value estimator: a ready estimator module, a
            :class:`~rl_objectives.value.ValueEstimators` member or its name (default:
            ``"td0"``); built on first use, with this loss's ``gamma``.
        scalar_output_mode: with ``reduction="none"``: ``"exclude"`` or ``"non_tensor"`` for
            the scalar ``alpha`` / ``entropy`` (``None``: excluded with a warning, as TorchRL).
        debug: raise on non-finite inputs.

    Examples:
        >>> import torch
        >>> from torch import distributions as D
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import (TensorDictModule, ProbabilisticTensorDictModule,
        ...                            ProbabilisticTensorDictSequential, NormalParamExtractor)
        >>> def normal(loc, scale):
        ...     return D.Independent(D.Normal(loc, scale), 1)
        >>> actor = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 4), NormalParamExtractor()),
        ...                      ["observation"], ["loc", "scale"]),
        ...     ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=normal))
        >>> class Q(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.lin = torch.nn.Linear(5, 1)
        ...     def forward(self, obs, act):
        ...         return self.lin(torch.cat([obs, act], -1))
        >>> q = TensorDictModule(Q(), ["observation", "action"], ["state_action_value"])
        >>> td = TensorDict({
        ...     "observation": torch.randn(8, 3), "action": torch.randn(8, 2),
        ...     ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ...     ("next", "done"): torch.zeros(8, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool)}, batch_size=[8])
        >>> out = SACLoss(actor, q, target_entropy=-2.0)(td)
        >>> sorted(k for k in out.keys() if k.startswith("loss"))
        ['loss_actor', 'loss_alpha', 'loss_qvalue']
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`SACLoss`."""

        action: NestedKey = "action"
        value: NestedKey = "state_value"
        state_action_value: NestedKey = "state_action_value"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        priority_weight: NestedKey = "priority_weight"
        # TorchRL's key of a stored log-prob; the losses here score fresh samples, never read it
        log_prob: NestedKey = "action_log_prob"

    default_keys = _AcceptedKeys
    default_out_keys = ("loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy")
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = TD_ESTIMATORS

    def _default_out_keys(self) -> list[str]:
        keys = list(self.default_out_keys)
        return keys if self.value_network is None else [*keys, "loss_value"]

    def __init__(
        self,
        actor_network: nn.Module,
        qvalue_network: nn.Module | list[nn.Module],
        value_network: nn.Module | None = None,
        *,
        num_qvalue_nets: int = 2,
        loss_function: str = "smooth_l1",
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        action_spec: Any = None,
        fixed_alpha: bool = False,
        target_entropy: str | float = "auto",
        delay_actor: bool = False,
        delay_qvalue: bool = True,
        delay_value: bool = True,
        gamma: float | None = None,
        reduction: str | None = None,
        use_prioritized_weights: str | bool = "auto",
        priority_key: NestedKey | None = None,
        skip_done_states: bool = False,
        separate_losses: bool = False,
        deactivate_vmap: bool = False,
        value_estimator: ValueEstimatorLike = None,
        scalar_output_mode: str | None = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug, value_estimator=value_estimator)
        self.scalar_output_mode = resolve_scalar_mode(
            "SACLoss", self.reduction, scalar_output_mode, "alpha, entropy"
        )
        self._reject_ctor_keys(priority_key=priority_key)
        self.skip_done_states = skip_done_states
        self.deactivate_vmap = deactivate_vmap
        if not hasattr(actor_network, "get_dist"):
            raise TypeError(
                "SACLoss needs an actor with get_dist(td) (e.g. ProbabilisticTensorDictSequential); "
                f"got {type(actor_network).__name__}."
            )
        self.convert_to_functional(actor_network, "actor_network", create_target_params=delay_actor)
        qnets = make_qvalue_networks(qvalue_network, num_qvalue_nets)
        self.separate_losses = separate_losses
        if not separate_losses:
            qnets = unshare_from(qnets, actor_network)
        self.convert_to_functional(qnets, "qvalue_network", create_target_params=delay_qvalue)
        self.delay_value = delay_value
        if value_network is not None:
            self.convert_to_functional(
                value_network, "value_network", create_target_params=delay_value
            )
        else:
            self.value_network = None
        self.temperature = Temperature(alpha_init, min_alpha, max_alpha, fixed_alpha)
        self.num_qvalue_nets = num_qvalue_nets
        self.loss_function = loss_function
        self.fixed_alpha = fixed_alpha
        self.delay_actor = delay_actor
        self.delay_qvalue = delay_qvalue
        self.gamma = gamma
        self.use_prioritized_weights = use_prioritized_weights
        spec = action_spec if action_spec is not None else getattr(actor_network, "spec", None)
        self._target_entropy: float | None = target_entropy_from(spec, target_entropy)

    @property
    def log_alpha(self) -> torch.Tensor:
        """The log-temperature (a parameter unless ``fixed_alpha``)."""
        return self.temperature.log_alpha

    @property
    def target_entropy(self) -> torch.Tensor | None:
        """The target entropy, a tensor as TorchRL's buffer (``None`` until inferred from the
        first batch when ``"auto"`` found no spec)."""
        if self._target_entropy is None:
            return None
        return torch.tensor(self._target_entropy, device=self.log_alpha.device)

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, TD_ESTIMATOR_KEYS)

    def _sample(
        self, td: TensorDictBase, params: TensorDictBase | BoundParams | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        dist = dist_of(self.actor_network, td, params)
        action = dist.rsample()
        return action, sum_to_batch(dist.log_prob(action), td.ndim)

    def _qs(
        self, td: TensorDictBase, action: torch.Tensor, params: TensorDictBase | BoundParams | None
    ) -> torch.Tensor:
        keys = self.tensor_keys
        overrides = {keys.action: action}
        return stacked_outputs(
            self.qvalue_network, td, keys.state_action_value, params, overrides
        ).squeeze(-1)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute the three losses; writes ``td_error`` (max over critics) into ``tensordict``.

        Returns:
            ``loss_actor``, ``loss_qvalue``, ``loss_alpha`` and detached ``alpha``, ``entropy``.
        """
        keys = self.tensor_keys
        weights = self._weights(tensordict)
        action = self._get(tensordict, "action")
        self._get(tensordict, "reward", under_next=True)
        alpha = self.temperature.alpha()
        if self._target_entropy is None:
            self._target_entropy = -float(math.prod(action.shape[tensordict.ndim :]))
        if self.value_network is not None:
            return self._forward_v1(tensordict, action, alpha, weights)
        # critics
        with torch.no_grad():
            nxt = tensordict.get("next")
            next_action, next_log_prob = self._sample(
                nxt, self._bound_params("actor_network", target=True) if self.delay_actor else None
            )
            next_q = self._qs(nxt, next_action, self._bound_params("qvalue_network", target=True))
            next_value = soft_state_value(clipped_double_q(next_q), next_log_prob, alpha)
            next_value = next_value.unsqueeze(-1)
        target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        pred = self._qs(tensordict, action, self._own_params("qvalue_network"))
        tensordict.set(keys.priority, (pred.detach() - target).abs().amax(0))
        loss_q = distance_loss(pred, target.expand_as(pred), self.loss_function).sum(0)
        loss_q = self._reduce(loss_q, weights)
        # actor: reparameterised sample, critics on detached parameters
        new_action, log_prob = self._sample(tensordict, None)
        # min over critics: on ties the gradient goes to one critic, as in TorchRL
        q_new = clipped_double_q(
            self._qs(tensordict, new_action, self._bound_params("qvalue_network", target=False))
        )
        loss_actor = self._reduce(soft_policy_loss(log_prob, q_new, alpha), weights)
        loss_alpha = self._reduce(
            temperature_loss(self.log_alpha, log_prob, self._target_entropy), weights
        )
        return assemble_output(
            {"loss_actor": loss_actor, "loss_qvalue": loss_q, "loss_alpha": loss_alpha},
            {"alpha": alpha, "entropy": -log_prob.detach().mean()},
            reduction=self.reduction,
            scalar_mode=self.scalar_output_mode,
            batch_size=tensordict.batch_size,
        )

    def _forward_v1(
        self,
        tensordict: TensorDictBase,
        action: torch.Tensor,
        alpha: torch.Tensor,
        weights: torch.Tensor | None,
    ) -> TensorDictBase:
        """SAC v1: critics on their own chunk of the batch, bootstrapped on V_target; V's loss."""
        keys = self.tensor_keys
        n = self.num_qvalue_nets
        batch = tensordict.shape
        if batch[0] % n:
            raise RuntimeError(
                f"SACLoss (with a value_network): the batch size {tuple(batch)} must split evenly "
                f"among the num_qvalue_nets={n} critics (each critic trains on its own chunk)."
            )
        with torch.no_grad():
            nxt = tensordict.get("next")
            next_value = output_of(
                self.value_network,
                nxt,
                keys.value,
                self._bound_params("value_network", target=True),
            )
        target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        # every critic on every sample, then critic i keeps its chunk i (the diagonal)
        pred_all = self._qs(tensordict, action, self._own_params("qvalue_network")).reshape(
            n, n, -1, *batch[1:]
        )
        idx = torch.arange(n, device=pred_all.device)
        pred = pred_all[idx, idx].reshape(batch)
        td_error = (pred.detach() - target).pow(2)
        tensordict.set(keys.priority, td_error)
        loss_q = self._reduce(distance_loss(pred, target, self.loss_function), weights)
        # state value against the soft value of the target actor and critics
        value = output_of(self.value_network, tensordict, keys.value, None).squeeze(-1)
        with torch.no_grad():
            target_actor = self._bound_params("actor_network", target=True)
            v_action, v_log_prob = self._sample(tensordict, target_actor)
            v_q = self._qs(tensordict, v_action, self._bound_params("qvalue_network", target=True))
            v_target = soft_state_value(clipped_double_q(v_q), v_log_prob, alpha)
        loss_value = self._reduce(distance_loss(value, v_target, self.loss_function), weights)
        new_action, log_prob = self._sample(tensordict, None)
        # min over critics: on ties the gradient goes to one critic, as in TorchRL
        q_new = clipped_double_q(
            self._qs(tensordict, new_action, self._bound_params("qvalue_network", target=False))
        )
        loss_actor = self._reduce(soft_policy_loss(log_prob, q_new, alpha), weights)
        loss_alpha = self._reduce(
            temperature_loss(self.log_alpha, log_prob, self._target_entropy), weights
        )
        return assemble_output(
            {
                "loss_actor": loss_actor,
                "loss_qvalue": loss_q,
                "loss_alpha": loss_alpha,
                "loss_value": loss_value,
            },
            {"alpha": alpha, "entropy": -log_prob.detach().mean()},
            reduction=self.reduction,
            scalar_mode=self.scalar_output_mode,
            batch_size=tensordict.batch_size,
        )
