"""SAC for discrete actions (Christodoulou 2019, arXiv:1910.07207)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._alpha import Temperature
from rl_objectives._nets import (
    BoundParams,
    action_space_name,
    chosen_value,
    in_keys_of,
    make_qvalue_networks,
    stacked_outputs,
)
from rl_objectives._offline import assemble_output, resolve_scalar_mode
from rl_objectives.common import (
    TD_ESTIMATOR_KEYS,
    TD_ESTIMATORS,
    LossModule,
    ValueEstimatorLike,
    estimator_keys,
)
from rl_objectives.functional import (
    clipped_double_q,
    discrete_soft_policy_loss,
    distance_loss,
    expected_soft_value,
    temperature_loss,
)
from rl_objectives.value.registry import ValueEstimators

__all__ = ["DiscreteSACLoss"]


class DiscreteSACLoss(LossModule):
    """Discrete soft actor-critic: expectations over actions replace sampling.

    * ``V(s') = sum_a pi(a|s') (min_i Q_target_i(s', a) - alpha log pi(a|s'))``;
    * ``loss_qvalue = sum_i loss(Q_i(s, a), r + gamma V(s'))``;
    * ``loss_actor = sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a))`` (critics detached);
    * ``loss_alpha = -log_alpha (sum_a pi log pi + target_entropy)``.

    The actor's ``get_dist(td)`` must return a distribution with ``probs`` and ``logits``
    over the last dim (``Categorical`` or ``OneHotCategorical``); the Q network writes
    ``action_value`` (``[*B, n]``).

    Args:
        actor_network: the policy.
        qvalue_network: one Q network (copied, re-initialised) or a list of ``num_qvalue_nets``.
        action_space: ``"categorical"``, ``"one_hot"`` or a spec-like object.
        num_actions: number of actions (for ``target_entropy="auto"``; else read from the data).
        num_qvalue_nets: number of critics.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        alpha_init: initial temperature.
        min_alpha: lower clamp of alpha.
        max_alpha: upper clamp of alpha.
        fixed_alpha: do not learn alpha.
        target_entropy_weight: ``"auto"`` target entropy is ``weight * log(num_actions)``.
        target_entropy: a float or ``"auto"``.
        delay_qvalue: keep target critic parameters.
        gamma: discount (else the estimator's default, 0.99).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        use_prioritized_weights: weight samples by ``tensor_keys.priority_weight`` when present.
        priority_key: removed in TorchRL (raises; use ``set_keys(priority=...)``).
        skip_done_states: run the actor and critics on the not-done next states only (done
            next observations may be invalid, e.g. NaN); done steps bootstrap on 0, as TorchRL.
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
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import (TensorDictModule, ProbabilisticTensorDictModule,
        ...                            ProbabilisticTensorDictSequential)
        >>> actor = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["logits"]),
        ...     ProbabilisticTensorDictModule(["logits"], ["action"],
        ...                                   distribution_class=torch.distributions.Categorical))
        >>> q = TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["action_value"])
        >>> td = TensorDict({
        ...     "observation": torch.randn(8, 3), "action": torch.randint(4, (8,)),
        ...     ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ...     ("next", "done"): torch.zeros(8, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool)}, batch_size=[8])
        >>> out = DiscreteSACLoss(actor, q, action_space="categorical", num_actions=4)(td)
        >>> sorted(k for k in out.keys() if k.startswith("loss"))
        ['loss_actor', 'loss_alpha', 'loss_qvalue']
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`DiscreteSACLoss`."""

        action: NestedKey = "action"
        value: NestedKey = "state_value"
        action_value: NestedKey = "action_value"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        priority_weight: NestedKey = "priority_weight"

    default_keys = _AcceptedKeys
    default_out_keys = ("loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy")
    delay_actor = False  # TorchRL's attribute: the actor never has target parameters here
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = TD_ESTIMATORS

    def __init__(
        self,
        actor_network: nn.Module,
        qvalue_network: nn.Module | list[nn.Module],
        *,
        action_space: Any = None,
        num_actions: int | None = None,
        num_qvalue_nets: int = 2,
        loss_function: str = "smooth_l1",
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        fixed_alpha: bool = False,
        target_entropy_weight: float = 0.98,
        target_entropy: str | float = "auto",
        delay_qvalue: bool = True,
        gamma: float | None = None,
        reduction: str | None = None,
        use_prioritized_weights: str | bool = "auto",
        priority_key: NestedKey | None = None,
        skip_done_states: bool = False,
        deactivate_vmap: bool = False,
        value_estimator: ValueEstimatorLike = None,
        scalar_output_mode: str | None = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug, value_estimator=value_estimator)
        self.scalar_output_mode = resolve_scalar_mode(
            "DiscreteSACLoss", self.reduction, scalar_output_mode, "alpha, entropy"
        )
        self._reject_ctor_keys(priority_key=priority_key)
        self.skip_done_states = skip_done_states
        self.deactivate_vmap = deactivate_vmap
        if not hasattr(actor_network, "get_dist"):
            raise TypeError(
                "DiscreteSACLoss needs an actor with get_dist(td); "
                f"got {type(actor_network).__name__}."
            )
        self.convert_to_functional(actor_network, "actor_network")
        qnets = make_qvalue_networks(qvalue_network, num_qvalue_nets)
        self.convert_to_functional(qnets, "qvalue_network", create_target_params=delay_qvalue)
        self.temperature = Temperature(alpha_init, min_alpha, max_alpha, fixed_alpha)
        self.action_space = action_space_name(action_space, actor_network)
        if num_actions is None:
            num_actions = getattr(action_space, "n", None) or getattr(
                getattr(action_space, "space", None), "n", None
            )
        self.num_actions = num_actions
        self.num_qvalue_nets = num_qvalue_nets
        self.loss_function = loss_function
        self.delay_qvalue = delay_qvalue
        self.gamma = gamma
        self.use_prioritized_weights = use_prioritized_weights
        self.target_entropy_weight = target_entropy_weight
        if target_entropy == "auto":
            target_entropy = (
                target_entropy_weight * math.log(num_actions) if num_actions is not None else None
            )
        self._target_entropy: float | None = target_entropy

    @property
    def log_alpha(self) -> torch.Tensor:
        """The log-temperature."""
        return self.temperature.log_alpha

    @property
    def target_entropy(self) -> torch.Tensor | None:
        """The target entropy, a tensor as TorchRL's buffer (``None`` until inferred from the
        first batch when ``"auto"`` had no ``num_actions``)."""
        if self._target_entropy is None:
            return None
        return torch.tensor(self._target_entropy, device=self.log_alpha.device)

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, TD_ESTIMATOR_KEYS)

    def _policy(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        actor = self.actor_network
        dist = actor.get_dist(td.select(*in_keys_of(actor), strict=False))
        probs = dist.probs
        # log(0) guarded: a zero-probability action contributes 0 * finite
        log_probs = torch.log(torch.where(probs == 0, torch.full_like(probs, 1e-8), probs))
        return probs, log_probs

    def _qs(self, td: TensorDictBase, params: TensorDictBase | BoundParams | None) -> torch.Tensor:
        return stacked_outputs(self.qvalue_network, td, self.tensor_keys.action_value, params)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute the three losses; writes ``td_error`` (max over critics) into ``tensordict``."""
        keys = self.tensor_keys
        weights = self._weights(tensordict)
        action = self._get(tensordict, "action")
        self._get(tensordict, "reward", under_next=True)
        alpha = self.temperature.alpha()
        with torch.no_grad():
            nxt = tensordict.get("next")
            live = None
            if self.skip_done_states:
                live = ~self._get(tensordict, "done", under_next=True).reshape(nxt.shape)
                nxt = nxt[live]
            next_probs, next_log_probs = self._policy(nxt)
            if self._target_entropy is None:
                self._target_entropy = self.target_entropy_weight * math.log(next_probs.shape[-1])
            next_q = clipped_double_q(
                self._qs(nxt, self._bound_params("qvalue_network", target=True))
            )
            next_value = expected_soft_value(next_probs, next_q, next_log_probs, alpha)
            if live is not None:
                full = next_value.new_zeros(*live.shape, 1)
                next_value = full.masked_scatter(live.unsqueeze(-1), next_value)
        target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        q_all = self._qs(tensordict, None)
        pred = chosen_value(q_all, action.expand(q_all.shape[0], *action.shape), self.action_space)
        tensordict.set(keys.priority, (pred - target).detach().abs().max(0).values)
        loss_q = distance_loss(pred, target.expand_as(pred), self.loss_function).sum(0)
        loss_q = self._reduce(loss_q, weights)
        probs, log_probs = self._policy(tensordict)
        q_detached = clipped_double_q(
            self._qs(tensordict, self._bound_params("qvalue_network", target=False))
        )
        loss_actor = discrete_soft_policy_loss(probs, log_probs, q_detached, alpha)
        loss_actor = self._reduce(loss_actor, weights)
        neg_entropy = (probs * log_probs).sum(-1)
        loss_alpha = self._reduce(
            temperature_loss(self.log_alpha, neg_entropy, self._target_entropy), weights
        )
        return assemble_output(
            {"loss_actor": loss_actor, "loss_qvalue": loss_q, "loss_alpha": loss_alpha},
            {"alpha": alpha, "entropy": -neg_entropy.detach().mean()},
            reduction=self.reduction,
            scalar_mode=self.scalar_output_mode,
            batch_size=tensordict.batch_size,
        )
