"""DreamerV3's losses (Hafner et al., 2023, "Mastering Diverse Domains through World Models",
arXiv:2301.04104).

* :class:`DreamerV3ModelLoss`: KL balancing with free bits between categorical posterior and
  prior, symlog reconstruction, two-hot reward cross-entropy, optional continuation BCE.
* :class:`DreamerV3ActorLoss`: imagined lambda-returns (with a learned continuation),
  REINFORCE advantages normalised by the EMA of the 5%-95% return percentile range (or
  backpropagation through the dynamics), entropy bonus.
* :class:`DreamerV3ValueLoss`: symlog-MSE or two-hot critic, with an optional regulariser
  towards a slow (EMA, :class:`~rl_objectives.SoftUpdate`) copy of the critic.

Names, arguments, keys and defaults are TorchRL's (``torchrl.objectives.dreamer_v3``); losses
are scalars. ``burn_in`` of the model loss is an extension (see :mod:`rl_objectives.dreamer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from rl_objectives._dreamer_common import (
    DEFAULT_NUM_BINS,
    default_bins,
    discount_weights,
    estimator_factors,
    lambda_return,
    next_key,
    require_entry,
    sum_event,
    symlog,
    two_hot_cross_entropy,
    two_hot_decode,
)
from rl_objectives._keys import MissingKeyError
from rl_objectives.common import LossModule, loss_output
from rl_objectives.dreamer import DreamerActorLoss, DreamerModelLoss

__all__ = [
    "DreamerV3ActorLoss",
    "DreamerV3ModelLoss",
    "DreamerV3ValueLoss",
    "categorical_kl_balanced",
    "categorical_kl_terms",
]


def _mix(logits: torch.Tensor, unimix: float) -> torch.Tensor:
    probs = torch.softmax(logits, -1)
    return (1 - unimix) * probs + unimix / logits.shape[-1] if unimix else probs


def categorical_kl_terms(
    posterior_logits: torch.Tensor,
    prior_logits: torch.Tensor,
    free_nats: float = 1.0,
    unimix: float = 0.01,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DreamerV3's dynamics and representation losses (paper, eq. 5).

    ``dyn = max(free, KL(sg(q) || p))`` trains the prior, ``rep = max(free, KL(q || sg(p)))``
    the posterior; each KL is summed over the categoricals before the free-nats floor, then
    averaged.

    Args:
        posterior_logits: ``[*B, C, K]``.
        prior_logits: same shape.
        free_nats: floor of the summed KL. Default 1.
        unimix: uniform mixture of both distributions. Default 0.01.

    Returns:
        ``(dynamics, representation)`` scalars.

    Example:
        >>> dyn, rep = categorical_kl_terms(torch.zeros(2, 4, 3), torch.zeros(2, 4, 3))
        >>> dyn, rep
        (tensor(1.), tensor(1.))
    """
    q, p = _mix(posterior_logits, unimix), _mix(prior_logits, unimix)
    log_q, log_p = q.log(), p.log()
    dyn = (q.detach() * (log_q.detach() - log_p)).sum((-1, -2))
    rep = (q * (log_q - log_p.detach())).sum((-1, -2))
    if free_nats:
        dyn, rep = dyn.clamp_min(free_nats), rep.clamp_min(free_nats)
    return dyn.mean(), rep.mean()


def categorical_kl_balanced(
    posterior_logits: torch.Tensor,
    prior_logits: torch.Tensor,
    alpha: float = 0.8,
    free_bits: float = 1.0,
) -> torch.Tensor:
    """KL balancing: ``alpha KL(sg(q) || p) + (1 - alpha) KL(q || sg(p))``, free bits per
    categorical (TorchRL's ``"balanced"`` mode; probabilities floored at 1e-8).

    Example:
        >>> categorical_kl_balanced(torch.zeros(2, 4, 3), torch.zeros(2, 4, 3))
        tensor(1.)
    """
    q = torch.softmax(posterior_logits, -1).clamp(min=1e-8)
    p = torch.softmax(prior_logits, -1).clamp(min=1e-8)
    q_sg, p_sg = q.detach(), p.detach()
    dyn = (q_sg * (q_sg.log() - p.log())).sum(-1).clamp_min(free_bits).mean()
    rep = (q * (q.log() - p_sg.log())).sum(-1).clamp_min(free_bits).mean()
    return alpha * dyn + (1.0 - alpha) * rep


class DreamerV3ModelLoss(DreamerModelLoss):
    """DreamerV3's world-model loss on ``[*B, T]`` sequences.

    Writes ``loss_model_kl`` (``kl_mode="balanced"``) or ``loss_model_dynamic`` and
    ``loss_model_representation`` (``"separate"``, the paper's), ``loss_model_reco``
    (``sum_obs_dims (symlog(x) - symlog(x_hat))^2``, averaged), ``loss_model_reward`` (two-hot
    cross-entropy of ``("next", "reward_logits")``, or symlog-MSE of the scalar
    ``("next", "reward")`` with ``reward_two_hot=False``) and, when ``lambda_continue > 0``,
    ``loss_model_continue`` (BCE of the logit ``("next", "continue_pred")`` against
    ``continue_target_scale * (1 - terminated)``).

    Args:
        world_model: the world model (see :class:`~rl_objectives.DreamerModelLoss`).
        lambda_kl, lambda_reco, lambda_reward, lambda_continue: weights (1, 1, 1, 0).
        kl_mode: ``"balanced"`` (default, TorchRL's) or ``"separate"``.
        lambda_dynamic, lambda_representation: weights of the separate terms (1.0, 0.1;
            the paper uses 0.5 and 0.1).
        unimix: uniform mixture in the separate KL terms. Default 0.
        continue_target_scale: multiplier of non-terminal continuation targets. Default 1.
        kl_alpha: balancing of the ``"balanced"`` mode. Default 0.8.
        free_bits: KL floor. Default 1.
        reco_loss: ``"l2"`` (default) or ``"l1"``, on symlog values.
        reward_two_hot: two-hot reward head (default ``True``).
        num_reward_bins: bins of that head. Default 255.
        global_average: average over all dims. Default ``False``.
        burn_in: leading steps left out of the losses. Default 0.
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys under ``"next"``.

        Attributes:
            reward, reward_logits, true_reward, prior_logits, posterior_logits, pixels,
            reco_pixels, continue_pred, done, terminated: see the class docstring.
        """

        reward: NestedKey = "reward"
        reward_logits: NestedKey = "reward_logits"
        true_reward: NestedKey = "true_reward"
        prior_logits: NestedKey = "prior_logits"
        posterior_logits: NestedKey = "posterior_logits"
        pixels: NestedKey = "pixels"
        reco_pixels: NestedKey = "reco_pixels"
        continue_pred: NestedKey = "continue_pred"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

    default_keys = _AcceptedKeys
    reward_bins: torch.Tensor

    def __init__(
        self,
        world_model: Any,
        *,
        lambda_kl: float = 1.0,
        lambda_reco: float = 1.0,
        lambda_reward: float = 1.0,
        lambda_continue: float = 0.0,
        kl_mode: Literal["balanced", "separate"] = "balanced",
        lambda_dynamic: float = 1.0,
        lambda_representation: float = 0.1,
        unimix: float = 0.0,
        continue_target_scale: float = 1.0,
        kl_alpha: float = 0.8,
        free_bits: float = 1.0,
        reco_loss: str = "l2",
        reward_two_hot: bool = True,
        num_reward_bins: int = DEFAULT_NUM_BINS,
        global_average: bool = False,
        burn_in: int = 0,
    ) -> None:
        super().__init__(
            world_model,
            lambda_kl=lambda_kl,
            lambda_reco=lambda_reco,
            lambda_reward=lambda_reward,
            reco_loss=reco_loss,
            global_average=global_average,
            burn_in=burn_in,
            lambda_continue=lambda_continue,
        )
        if kl_mode not in ("balanced", "separate"):
            raise ValueError(f"kl_mode must be 'balanced' or 'separate', got {kl_mode!r}.")
        if reco_loss not in ("l2", "l1"):
            raise ValueError(f"reco_loss must be 'l2' or 'l1', got {reco_loss!r}.")
        if not 0 < continue_target_scale <= 1:
            raise ValueError("continue_target_scale must be in (0, 1].")
        self.kl_mode = kl_mode
        self.lambda_dynamic = lambda_dynamic
        self.lambda_representation = lambda_representation
        self.unimix = unimix
        self.continue_target_scale = continue_target_scale
        self.kl_alpha = kl_alpha
        self.free_bits = free_bits
        self.reward_two_hot = reward_two_hot
        self.num_reward_bins = num_reward_bins
        self.register_buffer("reward_bins", default_bins(num_reward_bins))

    def forward(self, tensordict: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
        """Returns ``(losses, world-model output)``; see the class docstring."""
        td = self._run_world_model(tensordict)
        name, keys, nb = type(self).__name__, self.tensor_keys, tensordict.ndim
        hint = "Check the world model's out_keys."

        def get(field: str, required: bool = True) -> torch.Tensor | None:
            key = next_key(getattr(keys, field))
            value = require_entry(td, key, name, field, hint) if required else td.get(key, None)
            return None if value is None else self._after_burn_in(value, nb)

        post, prior = get("posterior_logits"), get("prior_logits")
        entries: dict[str, torch.Tensor] = {}
        if self.kl_mode == "separate":
            dyn, rep = categorical_kl_terms(post, prior, self.free_bits, self.unimix)
            entries["loss_model_dynamic"] = self.lambda_kl * self.lambda_dynamic * dyn
            entries["loss_model_representation"] = self.lambda_kl * self.lambda_representation * rep
        else:
            kl = categorical_kl_balanced(post, prior, self.kl_alpha, self.free_bits)
            entries["loss_model_kl"] = self.lambda_kl * kl
        diff = symlog(get("pixels")) - symlog(get("reco_pixels"))
        reco = diff.pow(2) if self.reco_loss == "l2" else diff.abs()
        entries["loss_model_reco"] = self.lambda_reco * sum_event(reco, nb, self.global_average)
        true_reward = get("true_reward")
        if self.reward_two_hot:
            logits = get("reward_logits")
            if logits.shape[-1] != self.num_reward_bins:
                raise ValueError(
                    f"{name}: reward_two_hot=True expects ('next', 'reward_logits') over "
                    f"{self.num_reward_bins} bins, got a last dim of {logits.shape[-1]}."
                )
            reward_loss = two_hot_cross_entropy(logits, true_reward, self.reward_bins)
        else:
            reward_loss = (symlog(true_reward) - symlog(get("reward"))).pow(2)
        entries["loss_model_reward"] = self.lambda_reward * reward_loss.mean()
        if self.lambda_continue > 0:
            entries["loss_model_continue"] = self._continue_loss(td, nb)
        return loss_output(entries), td.detach()


class DreamerV3ActorLoss(DreamerActorLoss):
    """DreamerV3's actor loss over imagined trajectories.

    Lambda-returns use ``gamma * continuation[t]`` when a ``continuation_model`` (writing
    the continuation probability ``"continuation"`` from the imagined next latents) is given.
    Step weights ``w[t] = prod_{k<t} gamma c[k]`` (stored as ``"discount_weight"``).

    * ``use_reinforce=True``: ``-mean(sum_t w[t] log pi(a[t]) sg((G[t] - V(s[t])) / S))`` with
      ``S = max(min_scale, EMA(P95(G)) - EMA(P5(G)))`` updated in training mode.
    * else (continuous actors): ``-mean(sum_t w[t] G[t])``, backpropagated through the dynamics.

    Both subtract ``entropy_bonus * (-mean(sum_t w[t] log pi(a[t])))`` when the actor writes
    ``"action_log_prob"``.

    Args:
        actor_model, value_model, model_based_env: as :class:`~rl_objectives.DreamerActorLoss`.
        continuation_model: optional ``td -> td`` writing ``"continuation"``.
        imagination_horizon: imagined steps. Default 15.
        discount_loss: weight steps by ``w[t]``. Default ``True``.
        entropy_bonus: ``eta``. Default 3e-4.
        use_reinforce: REINFORCE gradient. Default ``False``.
        return_normalization: normalise REINFORCE advantages. Default ``True``.
        return_normalization_rate: EMA rate of the percentiles. Default 0.01.
        return_normalization_quantiles: Default ``(0.05, 0.95)``.
        return_normalization_min_scale: Default 1.
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Attributes: state, belief, reward, value, action_log_prob, done, terminated,
        continuation, discount_weight (TorchRL's names and defaults)."""

        state: NestedKey = "state"
        belief: NestedKey = "belief"
        reward: NestedKey = "reward"
        value: NestedKey = "state_value"
        action_log_prob: NestedKey = "action_log_prob"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        continuation: NestedKey = "continuation"
        discount_weight: NestedKey = "discount_weight"

    default_keys = _AcceptedKeys
    return_low: torch.Tensor
    return_high: torch.Tensor

    def __init__(
        self,
        actor_model: Any,
        value_model: Any,
        model_based_env: Any,
        *,
        continuation_model: Any = None,
        imagination_horizon: int = 15,
        discount_loss: bool = True,
        entropy_bonus: float = 3e-4,
        use_reinforce: bool = False,
        return_normalization: bool = True,
        return_normalization_rate: float = 0.01,
        return_normalization_quantiles: tuple[float, float] = (0.05, 0.95),
        return_normalization_min_scale: float = 1.0,
        gamma: float | None = None,
        lmbda: float | None = None,
    ) -> None:
        super().__init__(
            actor_model,
            value_model,
            model_based_env,
            imagination_horizon=imagination_horizon,
            discount_loss=discount_loss,
            continuation_model=continuation_model,
            gamma=gamma,
            lmbda=lmbda,
        )
        lo, hi = return_normalization_quantiles
        if not 0 <= lo < hi <= 1:
            raise ValueError("return_normalization_quantiles must satisfy 0 <= lower < upper <= 1.")
        if not 0 <= return_normalization_rate <= 1:
            raise ValueError("return_normalization_rate must be in [0, 1].")
        if return_normalization_min_scale <= 0:
            raise ValueError("return_normalization_min_scale must be positive.")
        self.entropy_bonus = entropy_bonus
        self.use_reinforce = use_reinforce
        self.return_normalization = return_normalization
        self.return_normalization_rate = return_normalization_rate
        self.return_normalization_quantiles = (lo, hi)
        self.return_normalization_min_scale = return_normalization_min_scale
        self.register_buffer("return_low", torch.tensor(0.0))
        self.register_buffer("return_high", torch.tensor(0.0))

    def _start(self, tensordict: TensorDictBase) -> TensorDictBase:
        keys = [self.tensor_keys.state, self.tensor_keys.belief]
        missing = [k for k in keys if tensordict.get(k, None) is None]
        if missing:
            present = sorted(str(k) for k in tensordict.keys(True, True))
            raise MissingKeyError(
                f"{type(self).__name__} starts imagination from the latents {missing}, missing "
                f"from its input (present: {present}). Feed it the world-model loss's output."
            )
        return tensordict.select(*keys).detach().reshape(-1)

    def _return_scale(self, returns: torch.Tensor) -> torch.Tensor:
        if not self.return_normalization:
            return torch.ones((), dtype=returns.dtype, device=returns.device)
        if self.training:
            q = torch.tensor(
                self.return_normalization_quantiles, dtype=returns.dtype, device=returns.device
            )
            low, high = torch.quantile(returns.detach().flatten(), q)
            with torch.no_grad():
                self.return_low.lerp_(low.to(self.return_low), self.return_normalization_rate)
                self.return_high.lerp_(high.to(self.return_high), self.return_normalization_rate)
        return (self.return_high - self.return_low).clamp_min(self.return_normalization_min_scale)

    def forward(self, tensordict: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
        """Returns ``(losses, fake_data)``; see the class docstring."""
        keys = self.tensor_keys
        fake, reward, next_value = self._imagine(tensordict)
        lmbda = estimator_factors(self)[1]
        step_gamma, continuation = self._step_discounts(fake, reward)
        target = lambda_return(reward, next_value, step_gamma, lmbda)
        fake.set("lambda_target", target)
        weights = discount_weights(step_gamma) if self.discount_loss else torch.ones_like(target)
        weights = weights.detach()
        fake.set(keys.discount_weight, weights)
        log_prob = fake.get(keys.action_log_prob, None)
        if log_prob is not None and log_prob.ndim == target.ndim - 1:
            log_prob = log_prob.unsqueeze(-1)
        if self.use_reinforce:
            if log_prob is None:
                raise MissingKeyError(
                    f"{type(self).__name__}(use_reinforce=True) needs the actor's "
                    f"{keys.action_log_prob!r}: build it with return_log_prob=True."
                )
            base_td = fake.select(*self.value_model.in_keys, strict=False)
            with torch.no_grad():
                self.value_model(base_td)
            scale = self._return_scale(target)
            advantage = ((target - base_td.get(keys.value)) / scale).detach()
            loss = -(weights * log_prob * advantage).sum((-2, -1)).mean()
        else:
            scale = torch.ones((), dtype=target.dtype, device=target.device)
            loss = -(weights * target).sum((-2, -1)).mean()
        if log_prob is not None and self.entropy_bonus > 0:
            entropy = -(weights * log_prob).sum((-2, -1)).mean()
            loss = loss - self.entropy_bonus * entropy
        ones = torch.ones((), device=loss.device)
        return loss_output(
            {
                "loss_actor": loss,
                "return_low": self.return_low.detach().clone(),
                "return_high": self.return_high.detach().clone(),
                "return_scale": scale.detach().clone(),
                "continuation_mean": ones if continuation is None else continuation.mean().detach(),
            }
        ), fake.detach()


class DreamerV3ValueLoss(LossModule):
    """DreamerV3's critic loss on the imagined lambda-returns.

    ``"symlog_mse"``: ``(symlog(V) - symlog(G))^2``; ``"two_hot"``: two-hot cross-entropy of
    ``"state_value_logits"`` against ``G``. Weighted by ``"discount_weight"`` when the data
    holds it (from :class:`DreamerV3ActorLoss`), else ``gamma^t`` (``discount_loss``), then
    averaged. With ``slow_critic_regularization > 0`` the loss adds that weight times the same
    loss against the decoded prediction of a slow copy of the critic
    (``target_value_model_params``; update it with ``SoftUpdate(loss, tau=0.02)``).

    Args:
        value_model: the critic (writes ``"state_value"`` and, for two-hot, the logits).
        value_loss: ``"symlog_mse"`` (default) or ``"two_hot"``.
        discount_loss: see above. Default ``True``.
        gamma: discount of the fallback weights. Default 0.99.
        num_value_bins: two-hot bins. Default 255.
        actor_loss: read ``gamma`` from this actor loss's estimator instead.
        slow_critic_regularization: weight of the slow-critic term. Default 0.
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Attributes: value (``"state_value"``), value_logits (``"state_value_logits"``),
        discount_weight (``"discount_weight"``)."""

        value: NestedKey = "state_value"
        value_logits: NestedKey = "state_value_logits"
        discount_weight: NestedKey = "discount_weight"

    default_keys = _AcceptedKeys
    default_out_keys: ClassVar[tuple[str, ...]] = ("loss_value",)
    value_bins: torch.Tensor

    def __init__(
        self,
        value_model: Any,
        value_loss: str = "symlog_mse",
        discount_loss: bool = True,
        gamma: float = 0.99,
        num_value_bins: int = DEFAULT_NUM_BINS,
        actor_loss: Any = None,
        slow_critic_regularization: float = 0.0,
    ) -> None:
        super().__init__()
        if value_loss not in ("symlog_mse", "two_hot"):
            raise ValueError(f"value_loss must be 'symlog_mse' or 'two_hot', got {value_loss!r}.")
        if slow_critic_regularization < 0:
            raise ValueError("slow_critic_regularization must be non-negative.")
        self.convert_to_functional(
            value_model, "value_model", create_target_params=bool(slow_critic_regularization)
        )
        self.value_loss = value_loss
        self.discount_loss = discount_loss
        self.gamma = gamma
        self.slow_critic_regularization = slow_critic_regularization
        self.__dict__["_actor_loss"] = actor_loss
        self.register_buffer("value_bins", default_bins(num_value_bins))

    def _resolved_gamma(self) -> float:
        actor = self.__dict__["_actor_loss"]
        return float(self.gamma) if actor is None else estimator_factors(actor)[0]

    def _per_step(
        self, td: TensorDictBase, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The per-step loss ``[*B, H]`` and the prediction it used (logits or value)."""
        if self.value_loss == "two_hot":
            logits = require_entry(
                td, self.tensor_keys.value_logits, type(self).__name__, "value_logits",
                "The two-hot critic must write its logits.",
            )  # fmt: skip
            if logits.shape[-1] != self.value_bins.numel():
                raise ValueError(
                    f"{type(self).__name__}: value_loss='two_hot' expects logits over "
                    f"{self.value_bins.numel()} bins, got a last dim of {logits.shape[-1]}."
                )
            return two_hot_cross_entropy(logits, target, self.value_bins), logits
        value = td.get(self.tensor_keys.value).squeeze(-1)
        return (symlog(value) - symlog(target)).pow(2), value

    def forward(self, fake_data: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
        """Returns ``(losses, fake_data)``."""
        name = type(self).__name__
        target = require_entry(
            fake_data, "lambda_target", name, "lambda_target",
            "Feed the fake_data returned by DreamerV3ActorLoss.",
        ).detach().squeeze(-1)  # fmt: skip
        td = fake_data.select(*self.value_model.in_keys, strict=False)
        self.value_model(td)
        loss, _ = self._per_step(td, target)
        weights = fake_data.get(self.tensor_keys.discount_weight, None)
        if weights is not None:
            weights = weights.squeeze(-1)
        elif self.discount_loss and target.ndim >= 2:
            g = torch.full_like(target, self._resolved_gamma()).unsqueeze(-1)
            weights = discount_weights(g).squeeze(-1)
        else:
            weights = torch.ones_like(target)
        slow_loss = torch.zeros_like(loss)
        if self.slow_critic_regularization:
            slow_td = fake_data.select(*self.value_model.in_keys, strict=False)
            with torch.no_grad(), self.target_value_model_params.to_module(self.value_model):
                self.value_model(slow_td)
            if self.value_loss == "two_hot":
                slow_value = two_hot_decode(
                    slow_td.get(self.tensor_keys.value_logits), self.value_bins
                )
            else:
                slow_value = slow_td.get(self.tensor_keys.value).squeeze(-1)
            slow_loss, _ = self._per_step(td, slow_value)
            loss = loss + self.slow_critic_regularization * slow_loss
        return loss_output(
            {
                "loss_value": (weights * loss).mean(),
                "value_slow_loss": (weights * slow_loss).mean().detach(),
            }
        ), fake_data
