"""DQN (Mnih et al. 2015), double DQN (van Hasselt et al. 2016) and C51 (Bellemare et al. 2017)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._nets import action_space_name, call, chosen_value
from rl_objectives.common import (
    TD_ESTIMATOR_KEYS,
    TD_ESTIMATORS,
    LossModule,
    ValueEstimatorLike,
    estimator_keys,
    loss_output,
)
from rl_objectives.functional import (
    categorical_projection,
    distance_loss,
    double_q_value,
    greedy_q_value,
)
from rl_objectives.value.registry import ValueEstimators

__all__ = ["DQNLoss", "DistributionalDQNLoss"]


class DQNLoss(LossModule):
    """The DQN loss: ``loss(Q(s, a), r + gamma * max_a' Q_target(s', a'))``.

    The value network reads observations and writes ``action_value`` (``[*B, n]``).
    The greedy next value comes from the target parameters; with ``double_dqn`` the
    argmax comes from the online parameters. ``td_error`` (squared TD error, ``[*B]``)
    is written into the input for prioritized replay.

    Args:
        value_network: TensorDict module writing ``action_value``.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        delay_value: keep target parameters (update them with SoftUpdate / HardUpdate).
        double_dqn: pick the next action with the online network.
        gamma: discount (else the estimator's default, 0.99).
        action_space: ``"categorical"``, ``"one_hot"`` or a spec-like object; read from
            ``value_network.action_space`` when omitted.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        use_prioritized_weights: weight samples by ``tensor_keys.priority_weight`` when present.
        priority_key: removed in TorchRL (raises; use ``set_keys(priority=...)``).
        value_estimator: the value estimator: a ready estimator module, a
            :class:`~rl_objectives.value.ValueEstimators` member or its name (default:
            ``"td0"``); built on first use, with this loss's ``gamma``.
        debug: raise on non-finite inputs.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> net = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action_value"])
        >>> loss = DQNLoss(net, action_space="categorical", gamma=0.9)
        >>> td = TensorDict({
        ...     "observation": torch.randn(8, 3), "action": torch.randint(2, (8,)),
        ...     ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ...     ("next", "done"): torch.zeros(8, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool)}, batch_size=[8])
        >>> loss(td)["loss"].shape
        torch.Size([])
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`DQNLoss` (TorchRL's names; ``priority_weight`` follows docs/contract.md)."""

        advantage: NestedKey = "advantage"
        value_target: NestedKey = "value_target"
        value: NestedKey = "chosen_action_value"
        action_value: NestedKey = "action_value"
        action: NestedKey = "action"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        priority_weight: NestedKey = "priority_weight"

    default_keys = _AcceptedKeys
    default_out_keys = ("loss",)
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = TD_ESTIMATORS

    def __init__(
        self,
        value_network: nn.Module,
        *,
        loss_function: str = "l2",
        delay_value: bool = True,
        double_dqn: bool = False,
        gamma: float | None = None,
        action_space: Any = None,
        reduction: str | None = None,
        use_prioritized_weights: str | bool = "auto",
        priority_key: NestedKey | None = None,
        value_estimator: ValueEstimatorLike = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug, value_estimator=value_estimator)
        self._reject_ctor_keys(priority_key=priority_key)
        self.convert_to_functional(value_network, "value_network", create_target_params=delay_value)
        self.loss_function = loss_function
        self.delay_value = delay_value
        self.double_dqn = double_dqn
        self.gamma = gamma
        self.action_space = action_space_name(action_space, value_network)
        self.use_prioritized_weights = use_prioritized_weights

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, (*TD_ESTIMATOR_KEYS, "advantage", "value_target"))

    def _next_value(self, td: TensorDictBase) -> torch.Tensor:
        key = self.tensor_keys.action_value
        with torch.no_grad():
            nxt = td.get("next")
            q_target = call(
                self.value_network, nxt, self._bound_params("value_network", target=True)
            ).get(key)
            if self.double_dqn:
                q_online = call(
                    self.value_network, nxt, self._bound_params("value_network", target=False)
                ).get(key)
                return double_q_value(q_target, q_online)
            return greedy_q_value(q_target)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute the loss; writes ``td_error`` into ``tensordict``.

        Returns:
            a TensorDict with ``loss``, plus detached ``td_error_mean`` and ``target_value``.
        """
        keys = self.tensor_keys
        action = self._get(tensordict, "action")
        self._get(tensordict, "reward", under_next=True)
        q = call(self.value_network, tensordict).get(keys.action_value)
        pred = chosen_value(q, action, self.action_space)
        next_value = self._next_value(tensordict)
        target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        td_error = (pred - target).detach().pow(2)
        tensordict.set(keys.priority, td_error)
        loss = distance_loss(pred, target, self.loss_function)
        loss = self._reduce(loss, self._weights(tensordict))
        return loss_output(
            {"loss": loss, "td_error_mean": td_error.mean(), "target_value": target.mean()}
        )


class DistributionalDQNLoss(LossModule):
    """The categorical (C51) distributional DQN loss (Bellemare et al. 2017, arXiv:1707.06887).

    The value network writes ``action_value`` as log-probabilities over atoms,
    ``[*B, n_atoms, n_actions]`` (log-softmax over atoms). The target distribution of the
    greedy next action under the target parameters is shifted by ``r + gamma * z``,
    projected on the support, and the loss is its cross-entropy with the predicted one.

    Args:
        value_network: TensorDict module writing ``action_value`` log-probabilities.
        gamma: discount.
        support: the atoms ``z`` (``[n_atoms]``); read from ``value_network.support`` when omitted.
        delay_value: keep target parameters.
        action_space: ``"categorical"`` or ``"one_hot"`` (default: the network's, else one_hot).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        use_prioritized_weights: weight samples by ``tensor_keys.priority_weight`` when present.
        priority_key: removed in TorchRL (raises; use ``set_keys(priority=...)``).
        debug: raise on non-finite inputs.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> class Net(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.lin = torch.nn.Linear(3, 5 * 2)
        ...     def forward(self, x):
        ...         return self.lin(x).view(*x.shape[:-1], 5, 2).log_softmax(-2)
        >>> net = TensorDictModule(Net(), ["observation"], ["action_value"])
        >>> loss = DistributionalDQNLoss(net, gamma=0.9, support=torch.linspace(-1, 1, 5),
        ...                              action_space="categorical")
        >>> td = TensorDict({
        ...     "observation": torch.randn(8, 3), "action": torch.randint(2, (8,)),
        ...     ("next", "observation"): torch.randn(8, 3), ("next", "reward"): torch.randn(8, 1),
        ...     ("next", "done"): torch.zeros(8, 1, dtype=torch.bool),
        ...     ("next", "terminated"): torch.zeros(8, 1, dtype=torch.bool)}, batch_size=[8])
        >>> loss(td)["loss"].shape
        torch.Size([])
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`DistributionalDQNLoss`."""

        action_value: NestedKey = "action_value"
        action: NestedKey = "action"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        steps_to_next_obs: NestedKey = "steps_to_next_obs"
        priority_weight: NestedKey = "priority_weight"

    default_keys = _AcceptedKeys
    default_out_keys = ("loss",)
    # the target is the projected one-step distribution: only TD(0) describes it
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = (ValueEstimators.TD0,)

    def __init__(
        self,
        value_network: nn.Module,
        *,
        gamma: float,
        support: torch.Tensor | None = None,
        delay_value: bool = True,
        action_space: Any = None,
        reduction: str | None = None,
        use_prioritized_weights: str | bool = "auto",
        priority_key: NestedKey | None = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug)
        self._reject_ctor_keys(priority_key=priority_key)
        if support is None:  # e.g. a DistributionalQValueActor: its head holds the atoms
            found = (getattr(m, "support", None) for m in value_network.modules())
            support = next((x for x in found if isinstance(x, torch.Tensor)), None)
        if support is None:
            raise ValueError(
                "DistributionalDQNLoss needs the atoms: pass support=torch.linspace(vmin, vmax, n) "
                "or give the value network a `support` attribute."
            )
        self.convert_to_functional(value_network, "value_network", create_target_params=delay_value)
        self.register_buffer("support", torch.as_tensor(support, dtype=torch.float32).clone())
        self.gamma = gamma
        self.delay_value = delay_value
        try:  # the network's spec or Q-value head, else one-hot
            self.action_space = action_space_name(action_space, value_network)
        except ValueError:
            self.action_space = "one_hot"
        self.use_prioritized_weights = use_prioritized_weights

    def _project(
        self, probs: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor
    ) -> torch.Tensor:
        """Project ``r + discount * z`` with probabilities ``probs`` onto the support."""
        return categorical_projection(probs, reward, discount, self.support)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute the loss; writes ``td_error`` (the per-sample cross-entropy) into ``tensordict``."""
        keys = self.tensor_keys
        action = self._get(tensordict, "action")
        reward = self._get(tensordict, "reward", under_next=True)
        terminated = tensordict.get(("next", keys.terminated), None)
        if terminated is None:
            terminated = self._get(tensordict, "done", under_next=True)
        log_q = call(self.value_network, tensordict).get(keys.action_value)
        if self.action_space == "categorical":
            idx = action.squeeze(-1) if action.ndim == log_q.ndim - 1 else action
            idx = idx.long().reshape(*idx.shape, 1, 1).expand(*log_q.shape[:-1], 1)
            log_p = log_q.gather(-1, idx).squeeze(-1)
        else:
            log_p = (log_q * action.to(log_q.dtype).unsqueeze(-2)).sum(-1)
        with torch.no_grad():
            nxt = tensordict.get("next")
            next_log_q = call(
                self.value_network, nxt, self._bound_params("value_network", target=True)
            ).get(keys.action_value)
            next_probs = next_log_q.exp()
            best = (next_probs * self.support.unsqueeze(-1)).sum(-2).argmax(-1)
            best = best.reshape(*best.shape, 1, 1).expand(*next_probs.shape[:-1], 1)
            next_p = next_probs.gather(-1, best).squeeze(-1)
            discount = self.gamma * (~terminated).to(next_p.dtype)
            steps = tensordict.get(keys.steps_to_next_obs, None)
            if steps is not None:
                discount = discount * self.gamma ** (steps.to(next_p.dtype) - 1).reshape(
                    discount.shape
                )
            target = self._project(next_p, reward.to(next_p.dtype), discount)
        loss = -(target * log_p).sum(-1)
        tensordict.set(keys.priority, loss.detach())
        return loss_output({"loss": self._reduce(loss, self._weights(tensordict))})
