"""PPO (Schulman et al. 2017, arXiv:1707.06347): plain surrogate, clipped, and KL-penalised."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection
from tensordict.nn import CompositeDistribution
from tensordict.utils import NestedKey
from torch import distributions as D
from torch import nn

from rl_objectives._nets import dist_of, output_of
from rl_objectives._pg import (
    actor_sample_keys,
    checked_clip_value,
    entropy_of,
    log_prob_of,
    prev_log_prob,
    standardize,
    sum_leaves,
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
from rl_objectives.functional import (
    adaptive_kl_factor,
    clipped_surrogate_loss,
    distance_loss,
    effective_sample_size,
    explained_variance,
    kl_penalty_loss,
    surrogate_loss,
)
from rl_objectives.value.registry import ValueEstimators

__all__ = ["ClipPPOLoss", "KLPENPPOLoss", "PPOLoss", "effective_sample_size"]


class PPOLoss(LossModule):
    """The unclipped PPO surrogate ``-(pi(a|s) / pi_old(a|s)) * A`` plus entropy and critic terms.

    The actor must offer ``get_dist(td)`` (e.g. ``ProbabilisticTensorDictSequential``);
    composite action distributions (``tensordict.nn.CompositeDistribution``) are supported:
    log-probabilities and entropies are summed over heads, and ``entropy_coeff`` may map
    each head's entropy key to its own coefficient. When the data has no ``advantage``, the
    value estimator (GAE by default) computes it with the critic, without gradients.

    Args:
        actor_network: the policy.
        critic_network: a TensorDict module writing ``state_value`` (optional without critic loss).
        entropy_bonus: add ``loss_entropy``.
        samples_mc_entropy: samples for a Monte-Carlo entropy when it has no closed form.
        entropy_coeff: entropy weight (default 0.01), or a mapping head-key -> weight.
        log_explained_variance: report ``explained_variance``.
        critic_coeff: critic weight (default 1.0 with a critic).
        loss_critic_type: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        normalize_advantage: standardise the advantage over the batch.
        normalize_advantage_exclude_dims: dims kept independent in that standardisation.
        gamma: discount for the estimator (else its default, 0.99).
        separate_losses: parameters the critic shares with the actor get no critic gradient.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        clip_value: clip the value prediction around the stored ``state_value`` by this much.
        advantage_key, value_target_key, value_key: removed in TorchRL (raise; use ``set_keys``).
        functional: TorchRL's switch; the networks are always called as they are here
            (never copied), and with ``False`` the ``*_network_params`` properties are ``None``.
        actor, critic: aliases of ``actor_network`` and ``critic_network``.
        device: TorchRL's device of the coefficient buffers; the coefficients are Python
            floats here (valid on any device) and the networks are not moved.
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
        >>> td = TensorDict({
        ...     "observation": torch.randn(6, 3), "action": torch.randint(2, (6,)),
        ...     "action_log_prob": torch.full((6,), -0.69), "advantage": torch.randn(6, 1),
        ...     "value_target": torch.randn(6, 1)}, batch_size=[6])
        >>> out = PPOLoss(actor, critic)(td)
        >>> sorted(k for k in out.keys() if k.startswith("loss"))
        ['loss_critic', 'loss_entropy', 'loss_objective']
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of the PPO losses."""

        advantage: NestedKey = "advantage"
        value_target: NestedKey = "value_target"
        value: NestedKey = "state_value"
        sample_log_prob: NestedKey = "action_log_prob"
        action: NestedKey = "action"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

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
        entropy_coeff: float | Mapping[NestedKey, float] | None = None,
        log_explained_variance: bool = True,
        critic_coeff: float | None = None,
        loss_critic_type: str = "smooth_l1",
        normalize_advantage: bool = False,
        normalize_advantage_exclude_dims: tuple[int, ...] = (),
        gamma: float | None = None,
        separate_losses: bool = False,
        reduction: str | None = None,
        clip_value: float | None = None,
        advantage_key: NestedKey | None = None,
        value_target_key: NestedKey | None = None,
        value_key: NestedKey | None = None,
        functional: bool = True,
        actor: nn.Module | None = None,
        critic: nn.Module | None = None,
        device: torch.device | str | None = None,
        value_estimator: ValueEstimatorLike = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug, value_estimator=value_estimator)
        # TorchRL puts its coefficient buffers there; the coefficients here are Python floats,
        # valid on every device, and the networks are not moved (as in TorchRL)
        self.device = None if device is None else torch.device(device)
        actor_network = actor if actor is not None else actor_network
        critic_network = critic if critic is not None else critic_network
        self._reject_ctor_keys(
            advantage_key=advantage_key, value_target_key=value_target_key, value_key=value_key
        )
        self.functional = functional
        if not hasattr(actor_network, "get_dist"):
            raise TypeError(
                f"{type(self).__name__} needs an actor with get_dist(td) (e.g. "
                f"ProbabilisticTensorDictSequential); got {type(actor_network).__name__}."
            )
        self.convert_to_functional(actor_network, "actor_network")
        if critic_network is not None:
            self.convert_to_functional(critic_network, "critic_network")
        else:
            self.critic_network = None
        if critic_coeff is None and critic_network is not None:
            critic_coeff = 1.0
        if critic_coeff and critic_network is None:
            raise TypeError(f"critic_coeff={critic_coeff} needs a critic_network.")
        self.critic_coeff = critic_coeff
        self.entropy_bonus = entropy_bonus
        self.samples_mc_entropy = samples_mc_entropy
        self.entropy_coeff = 0.01 if entropy_coeff is None else entropy_coeff
        self.log_explained_variance = log_explained_variance
        self.loss_critic_type = loss_critic_type
        self.normalize_advantage = normalize_advantage
        self.normalize_advantage_exclude_dims = tuple(normalize_advantage_exclude_dims)
        self.gamma = gamma
        self.separate_losses = separate_losses
        self.clip_value = checked_clip_value(clip_value, type(self).__name__)
        # as TorchRL: the policy says where its action and log-probability are written
        self.set_keys(**actor_sample_keys(actor_network))

    def _default_out_keys(self) -> list[str]:
        keys = ["loss_objective"]
        if self.entropy_bonus:
            keys += ["entropy", "loss_entropy"]
        if self.critic_network is not None and self.critic_coeff:
            keys.append("loss_critic")
        if self.clip_value:
            keys.append("value_clip_fraction")
        return keys

    def _value_estimator_network(self) -> nn.Module | None:
        return self.critic_network

    def _value_estimator_keys(self) -> dict[str, NestedKey]:
        return estimator_keys(self.tensor_keys, PG_ESTIMATOR_KEYS)

    # -- pieces ---------------------------------------------------------------------

    def _advantage(self, td: TensorDictBase) -> tuple[TensorDictBase, torch.Tensor]:
        """The advantage, and the data to read the rest from.

        Without an advantage in ``td``, the value estimator writes it (and ``value_target``)
        into a shallow copy of ``td``, returned in its place: the caller's data is not modified.
        """
        advantage = td.get(self.tensor_keys.advantage, None)
        if advantage is None:
            if self.critic_network is None:
                raise KeyError(
                    f"{type(self).__name__}: no {self.tensor_keys.advantage!r} in the input and no "
                    "critic to compute it; run a value estimator first or give a critic_network."
                )
            td = td.copy()
            estimator = self.value_estimator
            params = (
                self.detached_params("critic_network")
                if getattr(estimator, "differentiable", False)
                else None
            )
            estimator(td, params=params)
            advantage = self._get(td, "advantage")
        elif self.debug:
            advantage = self._get(td, "advantage")
        if self.normalize_advantage and advantage.numel() > 1:
            advantage = standardize(advantage, self.normalize_advantage_exclude_dims)
        return td, advantage

    def _dist(self, td: TensorDictBase, params: TensorDictBase | None = None) -> D.Distribution:
        return dist_of(self.actor_network, td, params)

    def _log_weight(self, td: TensorDictBase) -> tuple[torch.Tensor, D.Distribution, torch.Tensor]:
        """``log(pi / pi_old)`` per sample ``[*B]``, the distribution, and ``kl_approx``."""
        dist = self._dist(td)
        log_prob, heads = log_prob_of(dist, td, self.tensor_keys.action, td.ndim)
        if self.debug:
            self._get(td, "sample_log_prob")
        prev = prev_log_prob(
            td, self.tensor_keys.sample_log_prob, heads, td.ndim, type(self).__name__
        )
        log_weight = log_prob - prev
        return log_weight, dist, -log_weight.detach().mean()

    def _entropy_terms(self, dist: D.Distribution, batch_ndim: int, out: dict[str, Any]) -> None:
        if not self.entropy_bonus:
            return
        entropy = entropy_of(dist, batch_ndim, self.samples_mc_entropy)
        if is_tensor_collection(entropy):
            out["composite_entropy"] = entropy.detach().apply(lambda x: x.mean(), batch_size=[])
            out["entropy"] = sum_leaves(entropy, batch_ndim).detach().mean()
        else:
            out["entropy"] = entropy.detach().mean()
        out["loss_entropy"] = self._reduce(
            weighted_entropy_loss(entropy, self.entropy_coeff, batch_ndim)
        )

    def _critic_loss_inputs(
        self,
        target_return: torch.Tensor,
        state_value: torch.Tensor,
        old_state_value: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Hook on the critic-loss inputs (TorchRL's name): identity here.

        :class:`~rl_objectives.MAPPOLoss` overrides it to put the target, the prediction and
        the stored value through a running value normaliser before the distance and the clip.
        """
        return target_return, state_value, old_state_value

    def _critic_terms(self, td: TensorDictBase, out: dict[str, Any]) -> None:
        if self.critic_network is None or not self.critic_coeff:
            return
        keys = self.tensor_keys
        target = self._get(td, "value_target")
        old_value = (
            value_to_clip_around(td, self.tensor_keys.value, self.clip_value, "PPO")
            if self.clip_value
            else None
        )
        td_in = td.detach() if self.separate_losses else td
        value = output_of(self.critic_network, td_in, keys.value, self._own_params())
        target, value, old_value = self._critic_loss_inputs(target, value, old_value)
        if (
            self.reduction == "mean"
            and old_value is None
            and value.shape == target.shape
            and value.numel() == td.numel()
        ):
            # one value per sample: the per-sample loss is the element loss, so the mean is
            # fused into the loss kernel (the same value; a coefficient of 1 is not applied)
            if self.critic_coeff == 1:
                loss = distance_loss(target, value, self.loss_critic_type, reduction="mean")
            else:
                loss = (
                    self.critic_coeff * distance_loss(target, value, self.loss_critic_type)
                ).mean()
            out["loss_critic"] = loss
        else:
            loss, clip_fraction = summed_critic_loss(
                target, value, self.loss_critic_type, self.clip_value, old_value, td.ndim
            )
            out["loss_critic"] = self._reduce(self.critic_coeff * loss)
            if clip_fraction is not None:
                out["value_clip_fraction"] = clip_fraction
        if self.log_explained_variance:
            with torch.no_grad():
                out["explained_variance"] = explained_variance(target, value)

    def _objective(
        self,
        td: TensorDictBase,
        log_weight: torch.Tensor,
        advantage: torch.Tensor,
        dist: D.Distribution,
        out: dict[str, Any],
    ) -> torch.Tensor:
        """Per-sample objective to minimise (``[*B]``)."""
        return surrogate_loss(log_weight, advantage)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Compute the losses.

        Returns:
            ``loss_objective``, ``loss_entropy`` (with ``entropy_bonus``), ``loss_critic``
            (with a critic) and detached diagnostics (``entropy``, ``kl_approx``, ...).
        """
        td, advantage = self._advantage(tensordict)
        advantage = advantage.reshape(advantage.shape[: td.ndim])
        log_weight, dist, kl_approx = self._log_weight(td)
        out: dict[str, Any] = {}
        out["loss_objective"] = self._reduce(self._objective(td, log_weight, advantage, dist, out))
        out["kl_approx"] = kl_approx
        self._entropy_terms(dist, td.ndim, out)
        self._critic_terms(td, out)
        return loss_output(out)


class ClipPPOLoss(PPOLoss):
    """PPO with the clipped surrogate ``-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)``.

    Arguments are :class:`PPOLoss`'s plus:

    Args:
        clip_epsilon: ``eps`` or ``(eps_low, eps_high)``.
        clip_value: ``True`` clips the value prediction by ``clip_epsilon``; a float by that value.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import (TensorDictModule, ProbabilisticTensorDictModule,
        ...                            ProbabilisticTensorDictSequential)
        >>> actor = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["logits"]),
        ...     ProbabilisticTensorDictModule(["logits"], ["action"],
        ...                                   distribution_class=torch.distributions.Categorical))
        >>> td = TensorDict({
        ...     "observation": torch.randn(6, 3), "action": torch.randint(2, (6,)),
        ...     "action_log_prob": torch.full((6,), -0.69), "advantage": torch.randn(6, 1)},
        ...     batch_size=[6])
        >>> float(ClipPPOLoss(actor, entropy_bonus=False)(td)["clip_fraction"]) >= 0
        True
    """

    def __init__(
        self,
        actor_network: nn.Module | None = None,
        critic_network: nn.Module | None = None,
        *,
        clip_epsilon: float | tuple[float, float] = 0.2,
        clip_value: bool | float | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(clip_epsilon, (tuple, list)):
            low, high = clip_epsilon
        else:
            low = high = clip_epsilon
        if not (0 <= low < 1 and high >= 0):
            raise ValueError(
                f"clip_epsilon must give 0 <= eps_low < 1 and eps_high >= 0, got {clip_epsilon}."
            )
        if isinstance(clip_value, bool):
            if clip_value and low != high:
                raise ValueError(
                    "clip_value=True needs a symmetric clip_epsilon; pass a float clip_value."
                )
            clip_value = low if clip_value else None
        super().__init__(actor_network, critic_network, clip_value=clip_value, **kwargs)
        self.clip_epsilon = clip_epsilon

    def _objective(self, td, log_weight, advantage, dist, out):
        loss, out["clip_fraction"] = clipped_surrogate_loss(
            log_weight, advantage, self.clip_epsilon
        )
        out["ESS"] = effective_sample_size(log_weight)
        return loss


def _has_analytic_kl(p: D.Distribution, q: D.Distribution) -> bool:
    return D.kl._dispatch_kl(type(p), type(q)) is not NotImplemented


class KLPENPPOLoss(PPOLoss):
    """PPO with an adaptive KL penalty: ``-(r A - beta KL(pi_old || pi))``.

    ``beta`` is multiplied by ``increment`` when the mean KL exceeds ``1.5 dtarg`` and by
    ``decrement`` when it falls below ``dtarg / 1.5``. The old distribution is rebuilt from the
    stored distribution parameters with ``actor_network.build_dist_from_params(td)``.

    Arguments are :class:`PPOLoss`'s plus:

    Args:
        dtarg: target KL.
        beta: initial penalty weight.
        increment: growth factor of ``beta``.
        decrement: shrink factor of ``beta``.
        samples_mc_kl: samples for a Monte-Carlo KL when it has no closed form.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import (TensorDictModule, ProbabilisticTensorDictModule,
        ...                            ProbabilisticTensorDictSequential)
        >>> actor = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["logits"]),
        ...     ProbabilisticTensorDictModule(["logits"], ["action"],
        ...                                   distribution_class=torch.distributions.Categorical))
        >>> td = TensorDict({
        ...     "observation": torch.randn(6, 3), "action": torch.randint(2, (6,)),
        ...     "logits": torch.zeros(6, 2), "action_log_prob": torch.full((6,), -0.69),
        ...     "advantage": torch.randn(6, 1)}, batch_size=[6])
        >>> KLPENPPOLoss(actor)(td)["kl"].shape
        torch.Size([])
    """

    def __init__(
        self,
        actor_network: nn.Module | None = None,
        critic_network: nn.Module | None = None,
        *,
        dtarg: float = 0.01,
        beta: float = 1.0,
        increment: float = 2,
        decrement: float = 0.5,
        samples_mc_kl: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(actor_network, critic_network, **kwargs)
        if not hasattr(actor_network, "build_dist_from_params"):
            raise TypeError(
                "KLPENPPOLoss needs actor_network.build_dist_from_params(td) to rebuild the old "
                "distribution from stored parameters (ProbabilisticTensorDictSequential has it)."
            )
        self.dtarg = dtarg
        self.register_buffer("beta", torch.tensor(float(beta)))
        self._beta_init = float(beta)
        self.increment = increment
        self.decrement = decrement
        self.samples_mc_kl = samples_mc_kl

    def reset(self) -> None:
        """Restore the initial ``beta``."""
        self.beta.fill_(self._beta_init)

    def _kl(
        self, previous: D.Distribution, current: D.Distribution, batch_ndim: int
    ) -> torch.Tensor:
        composite = isinstance(previous, CompositeDistribution)
        if not composite and _has_analytic_kl(previous, current):
            kl = D.kl_divergence(previous, current)
            return kl.sum(tuple(range(batch_ndim, kl.ndim))) if kl.ndim > batch_ndim else kl
        x = previous.sample((self.samples_mc_kl,))
        lp_prev, lp_cur = previous.log_prob(x), current.log_prob(x)
        if is_tensor_collection(lp_prev):
            lp_prev, lp_cur = (
                sum_leaves(lp_prev, batch_ndim + 1),
                sum_leaves(lp_cur, batch_ndim + 1),
            )
        diff = lp_prev - lp_cur
        diff = (
            diff.sum(tuple(range(batch_ndim + 1, diff.ndim)))
            if diff.ndim > batch_ndim + 1
            else diff
        )
        return diff.mean(0)

    def _objective(self, td, log_weight, advantage, dist, out):
        try:
            previous = self.actor_network.build_dist_from_params(td)
        except KeyError as err:
            raise KeyError(
                "KLPENPPOLoss rebuilds the old distribution from its parameters stored in the data "
                f"(e.g. 'loc'/'scale' or 'logits'), and one is missing: {err}"
            ) from err
        kl = self._kl(previous, dist, td.ndim)
        with torch.no_grad():
            kl_mean = kl.detach().mean()
            factor = adaptive_kl_factor(kl_mean, self.dtarg, self.increment, self.decrement)
        beta = self.beta.clone()
        self.beta.mul_(factor)
        out["kl"] = kl_mean
        return kl_penalty_loss(log_weight, advantage, kl, beta)
