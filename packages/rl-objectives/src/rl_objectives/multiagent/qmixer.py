"""Value-decomposition Q-learning for cooperative teams: QMIX and VDN through a mixer.

Rashid et al. 2018, "QMIX", arXiv:1803.11485; Sunehag et al. 2017, "VDN", arXiv:1706.05296.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._nets import action_space_name, call, chosen_value
from rl_objectives.common import (
    TD_ESTIMATOR_KEYS,
    TD_ESTIMATORS,
    LossModule,
    estimator_keys,
    loss_output,
)
from rl_objectives.utils import distance_loss
from rl_objectives.value.registry import ValueEstimators

__all__ = ["QMixerLoss"]


class QMixerLoss(LossModule):
    """DQN on the team value ``Q_tot = mixer(Q_1(o_1, a_1), ..., Q_n(o_n, a_n), s)``.

    The local value network writes per-agent ``("agents", "action_value")``
    (``[*B, n_agents, n_actions]``); the loss picks each agent's stored action
    (``("agents", "action")``), writes ``("agents", "chosen_action_value")``
    (``[*B, n_agents, 1]``) and the mixer (``rl_modules.VDNMixer`` / ``QMixer`` in a
    TensorDict module) maps it, with an optional global state, to
    ``"chosen_action_value"`` (``[*B, 1]``). The target is the team reward plus the
    discounted target mixer applied to each agent's greedy target value at the next
    step: ``r + gamma (1 - terminated) mixer'(max_a Q'_i(o'_i, a), s')``. With
    ``delay_value`` (default) both networks keep target parameters
    (``target_local_value_network_params``, ``target_mixer_network_params``), updated
    by :class:`~rl_objectives.SoftUpdate` / :class:`~rl_objectives.HardUpdate`.
    ``td_error`` (``[*B]``, squared TD error) is written into the input.

    Args:
        local_value_network: TensorDict module writing ``("agents", "action_value")``.
        mixer_network: TensorDict module from ``("agents", "chosen_action_value")``
            (and a state) to ``"chosen_action_value"``; a plain ``nn.Module`` is
            wrapped with those keys (``in_keys=[local_value]``).
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        delay_value: keep target parameters for both networks.
        gamma: discount (else the estimator's default, 0.99).
        action_space: ``"categorical"`` / ``"one_hot"`` or a spec-like object; read from
            the local network when omitted.
        priority_key: removed in TorchRL (raises; use ``set_keys(priority=...)``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> n = 3
        >>> local = TensorDictModule(torch.nn.Linear(4, 2), [("agents", "observation")],
        ...                          [("agents", "action_value")])
        >>> class Sum(torch.nn.Module):
        ...     def forward(self, q):
        ...         return q.sum(-2)
        >>> loss = QMixerLoss(local, Sum(), action_space="categorical", gamma=0.9)
        >>> def step(b):
        ...     return TensorDict({"agents": TensorDict({
        ...         "observation": torch.randn(b, n, 4)}, [b, n])}, [b])
        >>> td = step(8).update({"next": step(8).update({
        ...     "reward": torch.randn(8, 1), "done": torch.zeros(8, 1, dtype=torch.bool),
        ...     "terminated": torch.zeros(8, 1, dtype=torch.bool)})})
        >>> td["agents", "action"] = torch.randint(2, (8, n))
        >>> loss(td)["loss"].shape
        torch.Size([])
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`QMixerLoss` (TorchRL's names and defaults)."""

        advantage: NestedKey = "advantage"
        value_target: NestedKey = "value_target"
        local_value: NestedKey = ("agents", "chosen_action_value")
        global_value: NestedKey = "chosen_action_value"
        action_value: NestedKey = ("agents", "action_value")
        action: NestedKey = ("agents", "action")
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

    default_keys = _AcceptedKeys
    default_out_keys = ("loss",)
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = TD_ESTIMATORS

    def __init__(
        self,
        local_value_network: nn.Module,
        mixer_network: nn.Module,
        *,
        loss_function: str = "l2",
        delay_value: bool = True,
        gamma: float | None = None,
        action_space: Any = None,
        priority_key: NestedKey | None = None,
    ) -> None:
        super().__init__()
        self._reject_ctor_keys(priority_key=priority_key)
        if not isinstance(mixer_network, TensorDictModuleBase):
            mixer_network = TensorDictModule(
                mixer_network,
                in_keys=[self.tensor_keys.local_value],
                out_keys=[self.tensor_keys.global_value],
            )
        self.convert_to_functional(
            local_value_network, "local_value_network", create_target_params=delay_value
        )
        self.convert_to_functional(mixer_network, "mixer_network", create_target_params=delay_value)
        self.loss_function = loss_function
        self.delay_value = delay_value
        self.gamma = gamma
        self.action_space = action_space_name(action_space, local_value_network)

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(
            self.tensor_keys,
            (*TD_ESTIMATOR_KEYS, "advantage", "value_target"),
            value="global_value",
        )

    @property
    def target_local_value_network_params(self) -> TensorDictBase | None:
        """Target parameters of the local value network (its detached ones without targets)."""
        return self._target_view("local_value_network")

    @property
    def target_mixer_network_params(self) -> TensorDictBase | None:
        """Target parameters of the mixer (its detached ones without targets)."""
        return self._target_view("mixer_network")

    def _local_values(self, td: TensorDictBase, *, target: bool) -> torch.Tensor:
        params = self._bound_params("local_value_network", target=True) if target else None
        key = self.tensor_keys.action_value
        values = call(self.local_value_network, td, params).get(key, None)
        if values is None:
            raise KeyError(
                f"QMixerLoss: the local value network wrote no {key!r}; give it that out_key "
                "or point the loss at yours with set_keys(action_value=...)."
            )
        return values

    def _mix(self, td: TensorDictBase, local: torch.Tensor, *, target: bool) -> torch.Tensor:
        keys = self.tensor_keys
        if local.ndim < 2:
            raise ValueError(
                f"QMixerLoss: per-agent values must be [*B, n_agents, 1], got {tuple(local.shape)}."
            )
        td = td.copy()
        td.set(keys.local_value, local)
        params = self._bound_params("mixer_network", target=True) if target else None
        out = call(self.mixer_network, td, params).get(keys.global_value, None)
        if out is None:
            raise KeyError(
                f"QMixerLoss: the mixer wrote no {keys.global_value!r}; give it that out_key or "
                "set_keys(global_value=...)."
            )
        return out

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute the loss; writes ``td_error`` into ``tensordict``.

        Returns:
            a TensorDict with ``loss`` and the detached ``td_error_mean`` and ``target_value``.
        """
        keys = self.tensor_keys
        action = self._get(tensordict, "action")
        self._get(tensordict, "reward", under_next=True)
        q = self._local_values(tensordict, target=False)
        chosen = chosen_value(q, action, self.action_space).unsqueeze(-1)  # [*B, n, 1]
        pred = self._mix(tensordict, chosen, target=False).squeeze(-1)  # [*B]
        with torch.no_grad():
            nxt = tensordict.get("next")
            q_next = self._local_values(nxt, target=True).max(-1, keepdim=True).values
            next_value = self._mix(nxt, q_next, target=True)
        target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        td_error = (pred - target).detach().pow(2)
        tensordict.set(keys.priority, td_error)
        loss = distance_loss(pred, target, self.loss_function).mean()
        return loss_output(
            {"loss": loss, "td_error_mean": td_error.mean(), "target_value": target.mean()}
        )
