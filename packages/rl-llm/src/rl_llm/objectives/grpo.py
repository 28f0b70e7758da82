"""``GRPOLoss``: group-relative policy optimisation for language models (clipped ratios, KL, token masks)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import NestedKey, TensorClass, TensorDictBase

from rl_llm.modules.base import LLMWrapperBase
from rl_llm.objectives._sequences import MaskingStrategy, get_dense, token_mask
from rl_llm.objectives.functional import Aggregation, aggregate, clipped_surrogate, kl_k3


class GRPOLossOutput(TensorClass["nocast"]):
    """What :class:`GRPOLoss` returns: the ``loss_*`` terms to sum, and diagnostics (detached)."""

    loss_objective: torch.Tensor
    clip_fraction: torch.Tensor
    kl_approx: torch.Tensor
    ESS: torch.Tensor
    entropy: torch.Tensor | None = None
    loss_entropy: torch.Tensor | None = None
    loss_kl_to_ref: torch.Tensor | None = None
    kl_to_ref: torch.Tensor | None = None

    def total(self) -> torch.Tensor:
        """The sum of the ``loss_*`` terms that are set (what to call ``backward`` on)."""
        terms = [self.loss_objective, self.loss_entropy, self.loss_kl_to_ref]
        return sum(t for t in terms if t is not None)


@dataclass(frozen=True)
class _AcceptedKeys:
    """Keys :class:`GRPOLoss` reads (change them with ``set_keys``)."""

    advantage: NestedKey = "advantage"
    action: NestedKey = ("tokens", "full")
    """The whole sequences (prompt + response) whose log-probs are scored."""
    prompt: NestedKey = ("tokens", "prompt")
    """Prompt tokens: where responses start (``masking_strategy='sft'``)."""
    sample_log_prob: NestedKey = ("log_probs", "full")
    """Log-probs of ``action`` under the policy that sampled it."""
    ref_log_probs: NestedKey = ("next", "ref_log_probs", "full")
    """Log-probs of ``action`` under the frozen reference model (for ``kl_to_ref_coeff``)."""
    attention_mask: NestedKey = ("masks", "all_attention_mask")
    assistant_mask: NestedKey = ("masks", "all_assistant_mask")


def _clip_bounds(clip_epsilon: float | tuple[float, float]) -> tuple[float, float]:
    low, high = (
        (clip_epsilon, clip_epsilon) if isinstance(clip_epsilon, (int, float)) else clip_epsilon
    )
    if not (0 <= low < 1 and high >= 0):
        raise ValueError(
            f"clip_epsilon must be in [0, 1) (or a (low, high) pair with high >= 0), got {clip_epsilon!r}."
        )
    return float(low), float(high)


class GRPOLoss(torch.nn.Module):
    """GRPO loss (DeepSeekMath, arXiv:2402.03300) with the Dr. GRPO and DAPO variants.

    For each token ``t`` the policy trains on (``masking_strategy``), with
    ``r_t = exp(log pi(a_t) - log pi_old(a_t))`` and the sequence's advantage ``A``::

        loss_t = -min(r_t A, clip(r_t, 1 - eps_low, 1 + eps_high) A)

    reduced by ``aggregation`` (``"token_mean"``: DAPO; ``"prompt_mean"``: GRPO;
    ``"constant_mean"``: Dr. GRPO, with ``max_tokens``). Options: an entropy bonus,
    and a KL penalty to a reference model (k3 estimator, as in GRPO) read from
    ``("next", "ref_log_probs", "full")``. Current log-probs come from
    ``actor_network.score`` (differentiable); the sampled ones from the batch.

    Args:
        actor_network: the trained policy (an :class:`~rl_llm.LLMWrapperBase`, e.g. a
            :class:`~rl_llm.TransformersWrapper`).
        clip_epsilon: ratio clipping; a ``(low, high)`` pair for DAPO's clip-higher. Defaults to 0.2.
        aggregation: ``"token_mean"`` (default), ``"prompt_mean"``, ``"constant_mean"`` or ``"none"``.
        max_tokens: the constant of ``"constant_mean"`` (default: the batch's padded length).
        entropy_bonus: add ``-entropy_coeff * entropy``. Defaults to ``True``.
        entropy_coeff: Defaults to 0.01.
        kl_to_ref_coeff: weight of the KL to the reference model; ``None`` disables it.
        masking_strategy: ``"sft"`` (response tokens, default), ``"rlhf"`` (every
            assistant token, from ``masks.all_assistant_mask``) or ``"generic"``.

    Examples:
        >>> from rl_llm.tiny import tiny_causal_lm, tiny_tokenizer
        >>> from rl_llm import TransformersWrapper
        >>> tok = tiny_tokenizer()
        >>> actor = TransformersWrapper(tiny_causal_lm(tok), tokenizer=tok, generate=False, input_mode="tokens")
        >>> loss = GRPOLoss(actor, clip_epsilon=(0.2, 0.28), aggregation="token_mean")
        >>> loss.tensor_keys.sample_log_prob
        ('log_probs', 'full')
    """

    default_keys = _AcceptedKeys

    def __init__(
        self,
        actor_network: LLMWrapperBase,
        *,
        clip_epsilon: float | tuple[float, float] = 0.2,
        aggregation: Aggregation = "token_mean",
        max_tokens: int | None = None,
        entropy_bonus: bool = True,
        entropy_coeff: float = 0.01,
        kl_to_ref_coeff: float | None = None,
        masking_strategy: MaskingStrategy = "sft",
    ) -> None:
        super().__init__()
        if not hasattr(actor_network, "score"):
            raise TypeError(
                f"actor_network must be an LLMWrapperBase (with a differentiable score method), got {type(actor_network).__name__}."
            )
        if aggregation not in ("token_mean", "prompt_mean", "constant_mean", "none"):
            raise ValueError(f"Unknown aggregation {aggregation!r}.")
        if masking_strategy not in ("sft", "rlhf", "generic"):
            raise ValueError(
                f"masking_strategy must be 'sft', 'rlhf' or 'generic', got {masking_strategy!r}."
            )
        self.actor_network = actor_network
        self.clip_epsilon_low, self.clip_epsilon_high = _clip_bounds(clip_epsilon)
        self.aggregation = aggregation
        self.max_tokens = max_tokens
        self.entropy_bonus = entropy_bonus
        self.entropy_coeff = entropy_coeff
        self.kl_to_ref_coeff = kl_to_ref_coeff
        self.masking_strategy = masking_strategy
        self.tensor_keys = _AcceptedKeys()

    def set_keys(self, **keys: NestedKey) -> GRPOLoss:
        """Changes the keys read (names of :class:`_AcceptedKeys` fields)."""
        unknown = set(keys) - set(_AcceptedKeys.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"Unknown keys {sorted(unknown)}; accepted: {sorted(_AcceptedKeys.__dataclass_fields__)}."
            )
        self.tensor_keys = _AcceptedKeys(**{**self.tensor_keys.__dict__, **keys})
        return self

    def _advantage(self, td: TensorDictBase, shape: torch.Size) -> torch.Tensor:
        advantage = td.get(self.tensor_keys.advantage, None)
        if advantage is None:
            raise KeyError(
                f"GRPOLoss reads the advantage at {self.tensor_keys.advantage!r}, which is missing: compute it with "
                "MCAdvantage (group-relative returns) first."
            )
        if advantage.shape in (shape[:1], (*shape[:1], 1)):
            return advantage.reshape(shape[0], 1).to(torch.get_default_dtype())
        if advantage.shape == shape:
            return advantage
        raise ValueError(
            f"advantage at {self.tensor_keys.advantage!r} must be per sequence ([B] or [B, 1]) or per token "
            f"{tuple(shape)}, got {tuple(advantage.shape)}."
        )

    def forward(self, tensordict: TensorDictBase) -> GRPOLossOutput:
        """Computes the loss terms on a batch of sampled sequences."""
        keys = self.tensor_keys
        full = get_dense(tensordict, keys.action, self.actor_network.pad_token_id)
        attention = get_dense(tensordict, keys.attention_mask, False).bool()
        if attention.shape != full.shape:
            raise ValueError(
                f"{keys.attention_mask!r} has shape {tuple(attention.shape)}, {keys.action!r} {tuple(full.shape)}."
            )
        mask = token_mask(
            tensordict,
            self.masking_strategy,
            full,
            attention,
            prompt_key=keys.prompt,
            assistant_key=keys.assistant_mask,
        )
        sample_log_prob = get_dense(tensordict, keys.sample_log_prob, 0.0).to(full.device)
        if sample_log_prob.shape != full.shape:
            raise ValueError(
                f"{keys.sample_log_prob!r} must align with {keys.action!r}: shapes {tuple(sample_log_prob.shape)} "
                f"and {tuple(full.shape)}."
            )
        advantage = self._advantage(tensordict, full.shape).to(full.device)
        if self.entropy_bonus:
            log_prob, entropy = self.actor_network.score(full, attention, return_entropy=True)
        else:
            log_prob = self.actor_network.score(full, attention)
        loss, log_weight, clipped = clipped_surrogate(
            log_prob, sample_log_prob, advantage, self.clip_epsilon_low, self.clip_epsilon_high
        )
        n = mask.sum().clamp_min(1)
        with torch.no_grad():
            lw = log_weight[mask]
            ess = (
                (2 * lw.logsumexp(0) - (2 * lw).logsumexp(0)).exp() / n
                if lw.numel()
                else lw.new_zeros(())
            )
            out = {
                "clip_fraction": (clipped & mask).sum() / n,
                "kl_approx": aggregate(0.5 * log_weight.pow(2), mask, "token_mean"),
                "ESS": ess,
            }
        out["loss_objective"] = self._aggregate(loss, mask)
        if self.entropy_bonus:
            out["entropy"] = aggregate(entropy, mask, "token_mean").detach()
            out["loss_entropy"] = -self.entropy_coeff * self._aggregate(entropy, mask)
        if self.kl_to_ref_coeff is not None:
            ref = get_dense(tensordict, keys.ref_log_probs, 0.0).to(full.device)
            if ref.shape != full.shape:
                raise ValueError(
                    f"{keys.ref_log_probs!r} must align with {keys.action!r}: {tuple(ref.shape)} vs {tuple(full.shape)}."
                )
            kl = kl_k3(log_prob, ref)
            out["kl_to_ref"] = aggregate(kl, mask, "token_mean").detach()
            out["loss_kl_to_ref"] = self.kl_to_ref_coeff * self._aggregate(kl, mask)
        return GRPOLossOutput(**out)

    def _aggregate(self, value: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return aggregate(value, mask, self.aggregation, self.max_tokens)
