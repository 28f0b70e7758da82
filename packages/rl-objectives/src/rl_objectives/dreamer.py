"""Dreamer's three losses (Hafner et al., 2019, "Dream to Control", arXiv:1912.01603).

* :class:`DreamerModelLoss`: the world model's ELBO on sequences, i.e. the KL between the
  RSSM's posterior and prior (clamped at ``free_nats``), the observation reconstruction and
  the reward regression.
* :class:`DreamerActorLoss`: imagines ``imagination_horizon`` steps from every posterior
  state with the actor in an imagination env (``DreamerEnv``), and maximises the
  lambda-returns by backpropagating through the learned dynamics.
* :class:`DreamerValueLoss`: regresses the value on those lambda-returns.

Names, arguments, keys and defaults are TorchRL's (``torchrl.objectives.dreamer``); the losses
are scalars (TorchRL's have shape ``[1]``). Extensions: ``DreamerModelLoss(burn_in=k)`` excludes
the first ``k`` steps of each sequence (used only to warm up the belief) from the losses;
``DreamerModelLoss(lambda_continue=w)`` trains a continuation head (BCE against
``1 - terminated``) and ``DreamerActorLoss(continuation_model=...)`` uses its probability as
the per-step discount of the lambda-returns (DreamerV3's form, optional in v1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from rl_objectives._dreamer_common import (
    discount_weights,
    distance,
    estimator_factors,
    hold_out,
    imagine,
    lambda_return,
    next_key,
    require_entry,
    sum_event,
)
from rl_objectives._keys import MissingKeyError
from rl_objectives.common import LossModule, loss_output
from rl_objectives.value.registry import ValueEstimators

__all__ = ["DreamerActorLoss", "DreamerModelLoss", "DreamerValueLoss"]


def check_burn_in(td: TensorDictBase, burn_in: int, owner: str) -> None:
    """Raise if the sequences of ``td`` (``[*B, T]``) are too short for ``burn_in``."""
    if td.ndim < 1:
        raise ValueError(
            f"{owner} needs sequences shaped [*B, T], got batch_size {tuple(td.batch_size)}. "
            "Sample slices of trajectories (SliceSampler) rather than single transitions."
        )
    length = td.shape[-1]
    if length <= burn_in:
        raise ValueError(
            f"{owner}: sequences of length T={length} are not longer than burn_in={burn_in}: no "
            f"step is left for the losses. Sample slices of more than {burn_in} steps "
            "(SliceSampler(slice_len=...)) or lower burn_in."
        )


class DreamerModelLoss(LossModule):
    """Dreamer's world-model loss on ``[*B, T]`` sequences.

    The world model (``WorldModelWrapper(encoder -> RSSMRollout -> decoder, reward_model)``)
    is run on a copy of the input whose true reward is moved to ``("next", "true_reward")``;
    it writes the prior/posterior parameters, the reconstruction and the predicted reward
    under ``"next"``.

    ``loss_model_kl = lambda_kl * mean(max(free_nats, KL(q || p)))`` (the KL summed over
    state dims; with ``delayed_clamp`` the clamp comes after the mean);
    ``loss_model_reco = lambda_reco * mean(sum_obs_dims(dist(obs, reco)))``;
    ``loss_model_reward = lambda_reward * mean(dist(r, r_hat))``; with ``lambda_continue > 0``,
    ``loss_model_continue = lambda_continue * mean(BCE(sigmoid(c_hat), 1 - terminated))`` on the
    logit ``("next", "continue_pred")`` of a continuation head.

    Args:
        world_model: the world model.
        lambda_kl: weight of the KL. Default 1.
        lambda_reco: weight of the reconstruction. Default 1.
        lambda_reward: weight of the reward loss. Default 1.
        reco_loss: ``"l2"`` (default), ``"l1"`` or ``"smooth_l1"``.
        reward_loss: as ``reco_loss``.
        free_nats: the KL's floor. Default 3.
        delayed_clamp: clamp after averaging. Default ``False``.
        global_average: average over every dim instead of summing event dims. Default ``False``.
        burn_in: leading steps of each sequence left out of the losses (they only warm up
            the belief). Default 0. Sequences must be longer.
        lambda_continue: weight of the continuation BCE (0: no continuation head). Default 0.

    Returns (forward):
        ``(losses, tensordict)``: the scalar losses and the world model's output (detached).

    Example:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> wm = TensorDictModule(
        ...     lambda o: (o * 0, o * 0 + 1, o * 0, o * 0 + 1, o, o.sum(-1, keepdim=True)),
        ...     in_keys=[("next", "pixels")],
        ...     out_keys=[("next", k) for k in ("prior_mean", "prior_std", "posterior_mean",
        ...               "posterior_std", "reco_pixels", "reward")])
        >>> td = TensorDict({("next", "pixels"): torch.ones(2, 5, 3),
        ...                  ("next", "reward"): torch.zeros(2, 5, 1)}, [2, 5])
        >>> losses, _ = DreamerModelLoss(wm)(td)
        >>> losses["loss_model_kl"], losses["loss_model_reco"], losses["loss_model_reward"]
        (tensor(3.), tensor(0.), tensor(9.))
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys (under ``"next"``) read by the loss.

        Attributes:
            reward: the true reward, then the predicted one. Default ``"reward"``.
            true_reward: where the true reward is moved. Default ``"true_reward"``.
            prior_mean, prior_std, posterior_mean, posterior_std: the RSSM's Gaussians.
            pixels: the observation to reconstruct. Default ``"pixels"``.
            reco_pixels: its reconstruction. Default ``"reco_pixels"``.
            continue_pred: the continuation logit. Default ``"continue_pred"``.
            terminated: the continuation target is its negation. Default ``"terminated"``.
            done: used when the data has no ``terminated``. Default ``"done"``.
        """

        reward: NestedKey = "reward"
        true_reward: NestedKey = "true_reward"
        prior_mean: NestedKey = "prior_mean"
        prior_std: NestedKey = "prior_std"
        posterior_mean: NestedKey = "posterior_mean"
        posterior_std: NestedKey = "posterior_std"
        pixels: NestedKey = "pixels"
        reco_pixels: NestedKey = "reco_pixels"
        continue_pred: NestedKey = "continue_pred"
        terminated: NestedKey = "terminated"
        done: NestedKey = "done"

    default_keys = _AcceptedKeys
    default_out_keys: ClassVar[tuple[str, ...]] = (
        "loss_model_kl",
        "loss_model_reco",
        "loss_model_reward",
    )

    def __init__(
        self,
        world_model: Any,
        *,
        lambda_kl: float = 1.0,
        lambda_reco: float = 1.0,
        lambda_reward: float = 1.0,
        reco_loss: str | None = None,
        reward_loss: str | None = None,
        free_nats: float = 3,
        delayed_clamp: bool = False,
        global_average: bool = False,
        burn_in: int = 0,
        lambda_continue: float = 0.0,
    ) -> None:
        super().__init__()
        self.world_model = world_model
        self.lambda_kl = lambda_kl
        self.lambda_reco = lambda_reco
        self.lambda_reward = lambda_reward
        self.reco_loss = reco_loss if reco_loss is not None else "l2"
        self.reward_loss = reward_loss if reward_loss is not None else "l2"
        self.free_nats = free_nats
        self.delayed_clamp = delayed_clamp
        self.global_average = global_average
        if burn_in < 0:
            raise ValueError(f"burn_in must be >= 0, got {burn_in}.")
        self.burn_in = burn_in
        if lambda_continue < 0:
            raise ValueError(f"lambda_continue must be >= 0, got {lambda_continue}.")
        self.lambda_continue = lambda_continue
        self.continue_target_scale = 1.0

    def kl_loss(
        self,
        prior_mean: torch.Tensor,
        prior_std: torch.Tensor,
        posterior_mean: torch.Tensor,
        posterior_std: torch.Tensor,
    ) -> torch.Tensor:
        """``KL(N(post) || N(prior))`` summed over state dims, clamped at ``free_nats``, averaged."""
        kl = (
            torch.log(prior_std / posterior_std)
            + (posterior_std**2 + (prior_mean - posterior_mean) ** 2) / (2 * prior_std**2)
            - 0.5
        )
        if not self.global_average:
            kl = kl.sum(-1)
        if self.delayed_clamp:
            return kl.mean().clamp_min(self.free_nats)
        return kl.clamp_min(self.free_nats).mean()

    def _run_world_model(self, tensordict: TensorDictBase) -> TensorDictBase:
        name = type(self).__name__
        check_burn_in(tensordict, self.burn_in, name)
        keys = self.tensor_keys
        td = tensordict.copy()
        reward_key, true_key = next_key(keys.reward), next_key(keys.true_reward)
        require_entry(td, reward_key, name, "reward", "The data must hold the env's rewards.")
        td.rename_key_(reward_key, true_key)
        return self.world_model(td)

    def _after_burn_in(self, x: torch.Tensor, batch_ndim: int) -> torch.Tensor:
        if not self.burn_in:
            return x
        return x.narrow(batch_ndim - 1, self.burn_in, x.shape[batch_ndim - 1] - self.burn_in)

    def _continue_loss(self, td: TensorDictBase, batch_ndim: int) -> torch.Tensor:
        """``lambda_continue * mean(BCE(continue_pred, scale * (1 - terminated)))`` (``done``
        when the data has no ``terminated``)."""
        name, keys = type(self).__name__, self.tensor_keys
        pred = require_entry(
            td, next_key(keys.continue_pred), name, "continue_pred",
            "lambda_continue > 0 needs a continuation head in the world model (e.g. "
            "rl_modules.ContinuationHead writing ('next', 'continue_pred')).",
        )  # fmt: skip
        ended = td.get(next_key(keys.terminated), None)
        if ended is None:
            ended = require_entry(
                td, next_key(keys.done), name, "done",
                "The continuation target is 1 - terminated (or 1 - done): store the env's flags.",
            )  # fmt: skip
        pred = self._after_burn_in(pred, batch_ndim)
        ended = self._after_burn_in(ended, batch_ndim)
        target = (~ended.bool()).to(pred.dtype) * self.continue_target_scale
        bce = F.binary_cross_entropy_with_logits(pred, target.reshape(pred.shape))
        return self.lambda_continue * bce

    def forward(self, tensordict: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
        """Returns ``(losses, world-model output)``; see the class docstring."""
        td = self._run_world_model(tensordict)
        name, keys, nb = type(self).__name__, self.tensor_keys, tensordict.ndim
        hint = "Check the world model's out_keys."

        def get(field: str) -> torch.Tensor:
            key = next_key(getattr(keys, field))
            return self._after_burn_in(require_entry(td, key, name, field, hint), nb)

        kl = self.kl_loss(
            get("prior_mean"), get("prior_std"), get("posterior_mean"), get("posterior_std")
        )
        obs, reco = get("pixels"), get("reco_pixels")
        reco_loss = sum_event(distance(reco, obs, self.reco_loss), nb, self.global_average)
        reward = distance(get("reward"), get("true_reward"), self.reward_loss)
        entries = {
            "loss_model_kl": self.lambda_kl * kl,
            "loss_model_reco": self.lambda_reco * reco_loss,
            "loss_model_reward": self.lambda_reward * reward.mean(),
        }
        if self.lambda_continue > 0:
            entries["loss_model_continue"] = self._continue_loss(td, nb)
        return loss_output(entries), td.detach()


class DreamerActorLoss(LossModule):
    """Dreamer's actor loss: maximise imagined lambda-returns through the learned dynamics.

    From the latents ``"state"``/``"belief"`` of the input (any batch shape, flattened), the
    actor runs ``imagination_horizon`` steps in ``model_based_env`` (sampling actions; the
    world model's weights are held out, gradients flow through its activations). The value
    model scores the imagined next states and
    ``G[t] = r[t] + gamma ((1 - lmbda) V(s[t+1]) + lmbda G[t+1])`` (``G[H-1] = r + gamma V(s[H])``);
    ``loss_actor = -mean_over_starts(sum_t w[t] G[t])`` with ``w[t] = gamma^t`` when
    ``discount_loss`` (else 1). With a ``continuation_model`` (writing the probability
    ``"continuation"`` of the imagined next latents, e.g. a ``ContinuationHead``), ``gamma``
    becomes ``gamma * c[t]`` in ``G`` and ``w[t] = prod_{k<t} gamma c[k]``, written to the
    fake data as ``"discount_weight"`` (read by :class:`DreamerValueLoss`). ``gamma`` and ``lmbda`` are those of the value estimator
    (``make_value_estimator(ValueEstimators.TDLambda, gamma=..., lmbda=...)``; defaults
    0.99 and 0.95).

    Args:
        actor_model: the policy (``TensorDictModule``-like, reads the latents).
        value_model: the value network (writes ``"state_value"``).
        model_based_env: the imagination env (``rl_envs.DreamerEnv``; any object with
            ``reset(td)`` and ``rollout(max_steps, policy, auto_reset=False, tensordict=td)``).
        imagination_horizon: imagined steps. Default 15.
        discount_loss: weight step ``t`` by ``gamma^t``. Default ``True``.
        continuation_model: optional ``td -> td`` reading the imagined next latents and
            writing ``"continuation"`` (its parameters are held out of this loss).

    Returns (forward):
        ``(losses, fake_data)``: ``loss_actor`` and the detached imagined trajectories
        ``[N, H]`` with ``"lambda_target"`` (input of :class:`DreamerValueLoss`).
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of the imagined data.

        Attributes:
            belief: the belief. Default ``"belief"``.
            reward: the imagined reward (under ``"next"``). Default ``"reward"``.
            value: the value. Default ``"state_value"``.
            done, terminated: unused by imagination (never done); kept for TorchRL.
            continuation: written by the continuation model. Default ``"continuation"``.
            discount_weight: the step weights written with a continuation model.
        """

        belief: NestedKey = "belief"
        reward: NestedKey = "reward"
        value: NestedKey = "state_value"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        continuation: NestedKey = "continuation"
        discount_weight: NestedKey = "discount_weight"

    default_keys = _AcceptedKeys
    default_value_estimator = ValueEstimators.TDLambda
    SUPPORTED_VALUE_ESTIMATORS = (
        ValueEstimators.TD0,
        ValueEstimators.TD1,
        ValueEstimators.TDLambda,
    )
    default_out_keys: ClassVar[tuple[str, ...]] = ("loss_actor",)

    def __init__(
        self,
        actor_model: Any,
        value_model: Any,
        model_based_env: Any,
        *,
        imagination_horizon: int = 15,
        discount_loss: bool = True,
        continuation_model: Any = None,
        gamma: float | None = None,
        lmbda: float | None = None,
    ) -> None:
        super().__init__()
        if gamma is not None or lmbda is not None:
            raise TypeError(
                f"{type(self).__name__}: pass gamma and lmbda to make_value_estimator("
                "ValueEstimators.TDLambda, gamma=..., lmbda=...), as in TorchRL."
            )
        self.actor_model = actor_model
        # not registered: the value model is trained by DreamerValueLoss
        self.__dict__["value_model"] = value_model
        self.__dict__["model_based_env"] = model_based_env
        self.__dict__["continuation_model"] = continuation_model
        self.imagination_horizon = imagination_horizon
        self.discount_loss = discount_loss

    def _start(self, tensordict: TensorDictBase) -> TensorDictBase:
        keys = ["state", self.tensor_keys.belief]
        missing = [k for k in keys if tensordict.get(k, None) is None]
        if missing:
            present = sorted(str(k) for k in tensordict.keys(True, True))
            raise MissingKeyError(
                f"{type(self).__name__} starts imagination from the latents {missing}, missing "
                f"from its input (present: {present}). Feed it the world-model loss's output "
                "(its root 'state'/'belief')."
            )
        return tensordict.select(*keys).detach().reshape(-1)

    def _imagine(
        self, tensordict: TensorDictBase
    ) -> tuple[TensorDictBase, torch.Tensor, torch.Tensor]:
        fake = imagine(
            self.model_based_env,
            self.actor_model,
            self._start(tensordict),
            self.imagination_horizon,
        )
        next_td = fake.get("next").copy()
        with hold_out(self.value_model):
            self.value_model(next_td)
        reward = fake.get(next_key(self.tensor_keys.reward))
        return fake, reward, next_td.get(self.tensor_keys.value)

    def _continuation(self, fake: TensorDictBase) -> torch.Tensor | None:
        """The continuation probability of each imagined next latent (``[N, H, 1]``), also
        written to ``fake`` under ``("next", continuation)``; ``None`` without a model."""
        model = self.__dict__["continuation_model"]
        if model is None:
            return None
        key = self.tensor_keys.continuation
        next_td = fake.get("next").select(*model.in_keys, strict=False)
        with hold_out(model):
            model(next_td)
        continuation = require_entry(
            next_td, key, type(self).__name__, "continuation",
            "The continuation model must write the probability of continuing.",
        )  # fmt: skip
        fake.set(next_key(key), continuation)
        return continuation

    def _step_discounts(
        self, fake: TensorDictBase, reward: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(gamma * c[t], c)`` per imagined step (``c`` = 1 without a continuation model)."""
        gamma = estimator_factors(self)[0]
        continuation = self._continuation(fake)
        if continuation is None:
            return torch.full_like(reward, gamma), None
        return gamma * continuation.reshape(reward.shape), continuation

    def forward(self, tensordict: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
        """Returns ``(losses, fake_data)``; see the class docstring."""
        fake, reward, next_value = self._imagine(tensordict)
        lmbda = estimator_factors(self)[1]
        step_gamma, continuation = self._step_discounts(fake, reward)
        target = lambda_return(reward, next_value, step_gamma, lmbda)
        fake.set("lambda_target", target)
        if self.discount_loss:
            weights = discount_weights(step_gamma).detach()
        else:
            weights = torch.ones_like(target)
        if continuation is not None:
            fake.set(self.tensor_keys.discount_weight, weights)
        loss = -(target * weights).sum((-2, -1)).mean()
        return loss_output({"loss_actor": loss}), fake.detach()


class DreamerValueLoss(LossModule):
    """Dreamer's value loss: regress ``V`` on the imagined lambda-returns.

    ``loss_value = mean_over_starts(sum_t w[t] dist(V(s[t]), G[t]))``, ``w[t] = gamma^t``
    when ``discount_loss`` (the fake data's ``"discount_weight"`` instead when it holds them:
    :class:`DreamerActorLoss` with a continuation model writes them).

    Args:
        value_model: the value network (writes ``"state_value"``).
        value_loss: ``"l2"`` (default), ``"l1"`` or ``"smooth_l1"``.
        discount_loss: weight step ``t`` by ``gamma^t``. Default ``True``.
        gamma: the discount of those weights. Default 0.99.

    Example:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> value = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["state"], out_keys=["state_value"])
        >>> fake = TensorDict(state=torch.randn(4, 5, 3), lambda_target=torch.randn(4, 5, 1),
        ...                   batch_size=[4, 5])
        >>> losses, _ = DreamerValueLoss(value)(fake)
        >>> losses["loss_value"].shape
        torch.Size([])
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Attributes:
        value: the value. Default ``"state_value"``.
        """

        value: NestedKey = "state_value"

    default_keys = _AcceptedKeys
    default_out_keys: ClassVar[tuple[str, ...]] = ("loss_value",)

    def __init__(
        self,
        value_model: Any,
        value_loss: str | None = None,
        discount_loss: bool = True,
        gamma: float = 0.99,
    ) -> None:
        super().__init__()
        self.value_model = value_model
        self.value_loss = value_loss if value_loss is not None else "l2"
        self.discount_loss = discount_loss
        self.gamma = gamma

    def forward(self, fake_data: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
        """Returns ``(losses, fake_data)``."""
        target = require_entry(
            fake_data, "lambda_target", type(self).__name__, "lambda_target",
            "Feed the fake_data returned by DreamerActorLoss.",
        )  # fmt: skip
        td = fake_data.select(*self.value_model.in_keys, strict=False)
        self.value_model(td)
        value = td.get(self.tensor_keys.value)
        stored = fake_data.get("discount_weight", None)
        if self.discount_loss and stored is not None:
            weights = stored.detach()
        elif self.discount_loss:
            weights = discount_weights(torch.full_like(target, self.gamma))
        else:
            weights = torch.ones_like(target)
        loss = (weights * distance(value, target.detach(), self.value_loss)).sum((-2, -1)).mean()
        return loss_output({"loss_value": loss}), fake_data
