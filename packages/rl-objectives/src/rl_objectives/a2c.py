"""A2C (Mnih et al. 2016, arXiv:1602.01783)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection
from tensordict.utils import NestedKey
from torch import distributions as D
from torch import nn

from rl_objectives._nets import call
from rl_objectives._pg import (
    action_log_prob,
    actor_sample_keys,
    checked_clip_value,
    entropy_of,
    summed_critic_loss,
    value_to_clip_around,
    weighted_entropy_loss,
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

__all__ = ["A2CLoss"]


class A2CLoss(LossModule):
    """Advantage actor-critic: ``-log pi(a|s) * A``, an entropy bonus and a critic regression.

    Args:
        actor_network: policy with ``get_dist(td)``.
        critic_network: TensorDict module writing ``state_value`` (optional).
        entropy_bonus: add ``loss_entropy``.
        samples_mc_entropy: samples for a Monte-Carlo entropy when it has no closed form.
        entropy_coeff: entropy weight (default 0.01).
        critic_coeff: critic weight.
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
        >>> critic = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["state_value"])
        >>> td = TensorDict({"observation": torch.randn(6, 3), "action": torch.randint(2, (6,)),
        ...                  "advantage": torch.randn(6, 1), "value_target": torch.randn(6, 1)},
        ...                 batch_size=[6])
        >>> sorted(k for k in A2CLoss(actor, critic)(td).keys() if k.startswith("loss"))
        ['loss_critic', 'loss_entropy', 'loss_objective']
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`A2CLoss`."""

        advantage: NestedKey = "advantage"
        value_target: NestedKey = "value_target"
        value: NestedKey = "state_value"
        action: NestedKey = "action"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        sample_log_prob: NestedKey = "action_log_prob"

    default_keys = _AcceptedKeys
    default_value_estimator = ValueEstimators.GAE
    SUPPORTED_VALUE_ESTIMATORS = tuple(ValueEstimators)

    def __init__(
        self,
        actor_network: nn.Module | None = None,
        critic_network: nn.Module | None = None,
        *,
        entropy_bonus: bool = True,
        samples_mc_entropy: int = 1,
        entropy_coeff: float | None = None,
        critic_coeff: float = 1.0,
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
                f"A2CLoss needs an actor with get_dist(td); got {type(actor_network).__name__}."
            )
        self.convert_to_functional(actor_network, "actor_network")
        if critic_network is not None:
            self.convert_to_functional(critic_network, "critic_network")
        else:
            self.critic_network = None
            critic_coeff = None
        self.entropy_bonus = entropy_bonus
        self.samples_mc_entropy = samples_mc_entropy
        self.entropy_coeff = 0.01 if entropy_coeff is None else entropy_coeff
        self.critic_coeff = critic_coeff
        self.loss_critic_type = loss_critic_type
        self.gamma = gamma
        self.clip_value = checked_clip_value(clip_value, "A2CLoss")
        # as TorchRL: the policy says where its action and log-probability are written
        self.set_keys(**actor_sample_keys(actor_network))

    def _default_out_keys(self) -> list[str]:
        keys = ["loss_objective"]
        if self.critic_coeff is not None:
            keys.append("loss_critic")
        if self.entropy_bonus:
            keys += ["entropy", "loss_entropy"]
        return keys

    def _value_estimator_network(self) -> nn.Module | None:
        return self.critic_network

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, PG_ESTIMATOR_KEYS)

    def _log_probs(self, td: TensorDictBase) -> tuple[torch.Tensor, D.Distribution]:
        """The log-probability of the stored action (``[*B]``) and the policy (TorchRL's method).

        Raises:
            RuntimeError: the stored action requires grad (the policy gradient would flow into
                whatever produced it; detach it when collecting).
        """
        action = td.get(self.tensor_keys.action, None)
        if action is not None and any(
            t.requires_grad
            for t in (action.values(True, True) if is_tensor_collection(action) else (action,))
        ):
            raise RuntimeError(
                "A2CLoss: the tensordict stored action requires grad. Detach it when collecting "
                "(the loss differentiates the policy's log-probability, not the action)."
            )
        dist, log_prob = action_log_prob(self.actor_network, td, self.tensor_keys.action)
        return log_prob, dist

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute the losses (``loss_objective``, ``loss_entropy``, ``loss_critic``) and ``entropy``."""
        td = tensordict.copy()
        if td.get(self.tensor_keys.advantage, None) is None:
            if self.critic_network is None:
                raise KeyError("A2CLoss: no advantage in the input and no critic to compute it.")
            self.value_estimator(td)
        advantage = self._get(td, "advantage")
        advantage = advantage.reshape(advantage.shape[: td.ndim])
        log_prob, dist = self._log_probs(td)
        out: dict[str, Any] = {
            "loss_objective": self._reduce(policy_gradient_loss(log_prob, advantage))
        }
        if self.entropy_bonus:
            entropy = entropy_of(dist, td.ndim, self.samples_mc_entropy)
            loss_entropy = weighted_entropy_loss(entropy, self.entropy_coeff, td.ndim)
            out["entropy"] = (
                (-loss_entropy / self.entropy_coeff).detach().mean()
                if self.entropy_coeff
                else torch.zeros(())
            )
            out["loss_entropy"] = self._reduce(loss_entropy)
        if self.critic_coeff is not None:
            target = self._get(td, "value_target")
            old = (
                value_to_clip_around(td, self.tensor_keys.value, self.clip_value, "A2C")
                if self.clip_value
                else None
            )
            td_in = td.detach() if self.separate_losses else td
            value = call(self.critic_network, td_in, self._own_params()).get(self.tensor_keys.value)
            loss, frac = summed_critic_loss(
                target, value, self.loss_critic_type, self.clip_value, old, td.ndim
            )
            out["loss_critic"] = self._reduce(self.critic_coeff * loss)
            if frac is not None:
                out["value_clip_fraction"] = frac
        return loss_output(out)
