"""REINFORCE with a baseline (Williams 1992)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._nets import call
from rl_objectives._pg import (
    action_log_prob,
    checked_clip_value,
    summed_critic_loss,
    value_to_clip_around,
)
from rl_objectives.common import (
    PG_ESTIMATOR_KEYS,
    LossModule,
    ValueEstimatorLike,
    estimator_keys,
    loss_output,
)
from rl_objectives.functional import policy_gradient_loss
from rl_objectives.value.registry import ValueEstimators

__all__ = ["ReinforceLoss"]


class ReinforceLoss(LossModule):
    """``loss_actor = -log pi(a|s) * A`` (advantage detached) and ``loss_value`` for the baseline.

    Args:
        actor_network: policy with ``get_dist(td)``.
        critic_network: TensorDict module writing ``state_value`` (optional).
        delay_value: keep target critic parameters for the value estimator's bootstrap.
        loss_critic_type: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        gamma: discount for the estimator (else its default, 0.99).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        clip_value: clip the value prediction around the stored ``state_value``.
        separate_losses: parameters the critic shares with the actor get no critic gradient.
        advantage_key, value_target_key: removed in TorchRL (raise; use ``set_keys``).
        functional: TorchRL's switch; the networks are always called as they are here
            (never copied), and with ``False`` the ``*_network_params`` properties are ``None``.
        actor, critic: aliases of ``actor_network`` and ``critic_network``.
        value_estimator: the value estimator: a ready estimator module, a
            :class:`~rl_objectives.value.ValueEstimators` member or its name (default:
            ``"gae"``); built on first use, with this loss's ``gamma``.
        debug: raise on non-finite inputs.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import (TensorDictModule, ProbabilisticTensorDictModule,
        ...                            ProbabilisticTensorDictSequential)
        >>> actor = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["logits"]),
        ...     ProbabilisticTensorDictModule(["logits"], ["action"],
        ...                                   distribution_class=torch.distributions.Categorical))
        >>> td = TensorDict({"observation": torch.randn(6, 3), "action": torch.randint(2, (6,)),
        ...                  "advantage": torch.randn(6, 1)}, batch_size=[6])
        >>> list(ReinforceLoss(actor)(td).keys())
        ['loss_actor']
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`ReinforceLoss`."""

        advantage: NestedKey = "advantage"
        value_target: NestedKey = "value_target"
        value: NestedKey = "state_value"
        sample_log_prob: NestedKey = "action_log_prob"
        action: NestedKey = "action"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

    default_keys = _AcceptedKeys
    default_out_keys = ("loss_actor", "loss_value")
    default_value_estimator = ValueEstimators.GAE
    SUPPORTED_VALUE_ESTIMATORS = tuple(ValueEstimators)

    def __init__(
        self,
        actor_network: nn.Module | None = None,
        critic_network: nn.Module | None = None,
        *,
        delay_value: bool = False,
        loss_critic_type: str = "smooth_l1",
        gamma: float | None = None,
        reduction: str | None = None,
        clip_value: float | None = None,
        separate_losses: bool = False,
        advantage_key: NestedKey | None = None,
        value_target_key: NestedKey | None = None,
        functional: bool = True,
        actor: nn.Module | None = None,
        critic: nn.Module | None = None,
        value_estimator: ValueEstimatorLike = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug, value_estimator=value_estimator)
        actor_network = actor if actor is not None else actor_network
        critic_network = critic if critic is not None else critic_network
        self._reject_ctor_keys(advantage_key=advantage_key, value_target_key=value_target_key)
        self.functional = functional
        self.separate_losses = separate_losses
        if not hasattr(actor_network, "get_dist"):
            raise TypeError(
                f"ReinforceLoss needs an actor with get_dist(td); got {type(actor_network).__name__}."
            )
        self.convert_to_functional(actor_network, "actor_network")
        if critic_network is not None:
            self.convert_to_functional(
                critic_network, "critic_network", create_target_params=delay_value
            )
        else:
            self.critic_network = None
        self.delay_value = delay_value
        self.loss_critic_type = loss_critic_type
        self.gamma = gamma
        self.clip_value = checked_clip_value(clip_value, "ReinforceLoss")

    def _value_estimator_network(self) -> nn.Module | None:
        return self.critic_network

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, PG_ESTIMATOR_KEYS)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute ``loss_actor`` and, with a critic, ``loss_value``."""
        td = tensordict.copy()
        if td.get(self.tensor_keys.advantage, None) is None:
            if self.critic_network is None:
                raise KeyError(
                    "ReinforceLoss: no advantage in the input and no critic to compute it."
                )
            target = self.target_params("critic_network") if self.delay_value else None
            self.value_estimator(td, target_params=target)
        advantage = self._get(td, "advantage")
        advantage = advantage.reshape(advantage.shape[: td.ndim]).detach()
        _, log_prob = action_log_prob(self.actor_network, td, self.tensor_keys.action)
        out: dict[str, Any] = {
            "loss_actor": self._reduce(policy_gradient_loss(log_prob, advantage))
        }
        if self.critic_network is not None:
            target = self._get(td, "value_target")
            old = (
                value_to_clip_around(td, self.tensor_keys.value, self.clip_value, "Reinforce")
                if self.clip_value
                else None
            )
            td_in = td.detach() if self.separate_losses else td
            value = call(self.critic_network, td_in, self._own_params()).get(self.tensor_keys.value)
            loss, frac = summed_critic_loss(
                target, value, self.loss_critic_type, self.clip_value, old, td.ndim
            )
            out["loss_value"] = self._reduce(loss)
            if frac is not None:
                out["value_clip_fraction"] = frac
        return loss_output(out)
