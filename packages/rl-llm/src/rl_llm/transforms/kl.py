"""``KLRewardTransform``: a KL penalty to a frozen reference model, subtracted from the reward."""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDictBase

from rl_llm.envs.transform import LLMTransform

NestedKey = str | tuple[str, ...]


class KLRewardTransform(LLMTransform):
    """Penalizes each reply by its KL divergence to a frozen reference model.

    At each step the reference model scores the reply the policy just produced
    (``ref_model(td)`` on a copy of the step input, in score mode, writing
    ``log_prob_key``); with the policy's own log-probs of the same tokens (also
    under ``log_prob_key`` in the step input) the penalty of row ``i`` is the
    sampled estimate ``kl_i = sum_t m_t (log pi(y_t) - log pi_ref(y_t))`` over the
    reply's tokens (mask ``m`` from ``mask_key`` when ``assistant_only`` and the
    reference wrote it, else every position; padding holds 0 log-prob in both). It
    writes ``("next", "kl_penalty")`` (``[B, 1]``) and, with ``add_to_reward``,
    subtracts ``coef * kl`` from ``("next", "reward")`` (the KL-shaped reward of
    RLHF, Ziegler et al. 2019).

    Args:
        ref_model: a callable TensorDict -> TensorDict that writes ``log_prob_key``
            for the very tokens the policy generated, e.g.
            ``TransformersWrapper(ref, tokenizer=tok, generate=False, input_mode="tokens")``
            (scoring ``("tokens", "full")``; re-rendering the History could tokenize the
            reply differently); its parameters are frozen here.
        coef: the KL coefficient.
        log_prob_key: where both models' per-token log-probs are.
        mask_key: the reference output's mask of the tokens to count.
        add_to_reward: subtract ``coef * kl`` from the reward.
        assistant_only: use ``mask_key`` when present.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> ref = lambda td: td.set(("log_probs", "response"), torch.full((1, 3), -1.0))
        >>> kl = KLRewardTransform(ref, coef=0.5, log_prob_key=("log_probs", "response"))
        >>> td = TensorDict({("log_probs", "response"): torch.full((1, 3), -0.5)}, [1])
        >>> kl._step(td, TensorDict(reward=torch.zeros(1, 1), batch_size=[1]))["reward"].tolist()
        [[-0.75]]
    """

    def __init__(
        self,
        ref_model: Callable[[TensorDictBase], TensorDictBase],
        *,
        coef: float = 1.0,
        log_prob_key: NestedKey = ("log_probs", "full"),
        mask_key: NestedKey = ("masks", "all_assistant_mask"),
        add_to_reward: bool = True,
        assistant_only: bool = True,
    ) -> None:
        if not callable(ref_model):
            raise TypeError(
                f"KLRewardTransform: ref_model must be callable; got {type(ref_model).__name__}."
            )
        if getattr(ref_model, "generate", False):
            raise ValueError(
                "KLRewardTransform: the reference model is in generate mode; it must score the policy's "
                "replies (build it with generate=False)."
            )
        if isinstance(ref_model, torch.nn.Module):
            ref_model.requires_grad_(False)
        self.ref_model = ref_model
        self.coef = float(coef)
        self.log_prob_key = log_prob_key
        self.mask_key = mask_key
        self.add_to_reward = add_to_reward
        self.assistant_only = assistant_only

    def _rows(self, td: TensorDictBase, key: NestedKey, who: str) -> list[torch.Tensor]:
        rows = [row.get(key, None) for row in td.unbind(0)]  # ragged (lazily stacked) or dense
        if any(row is None for row in rows):
            raise KeyError(
                f"KLRewardTransform: {who} wrote no {key!r}; it needs per-token log-probs there "
                f"(keys: {sorted(map(str, td.keys()))})."
            )
        return [row.reshape(-1) for row in rows]

    def kl(self, tensordict: TensorDictBase) -> torch.Tensor:
        """The per-row KL estimate ``[B, 1]`` of the replies in ``tensordict`` (the step input)."""
        policy_lp = self._rows(tensordict, self.log_prob_key, "the policy")
        with torch.no_grad():
            scored = self.ref_model(tensordict.copy())
        ref_lp = self._rows(scored, self.log_prob_key, "the reference model")
        masks: list[torch.Tensor | None] = [None] * len(ref_lp)
        if self.assistant_only and all(
            row.get(self.mask_key, None) is not None for row in scored.unbind(0)
        ):
            masks = self._rows(scored, self.mask_key, "the reference model")
        out = []
        for i, (lp, rlp, mask) in enumerate(zip(policy_lp, ref_lp, masks, strict=True)):
            if lp.shape != rlp.shape:
                raise ValueError(
                    f"KLRewardTransform: row {i} has {lp.numel()} policy log-probs but {rlp.numel()} from the "
                    "reference model; both must score the same tokens under the same key."
                )
            diff = lp.detach().float() - rlp.float().to(lp.device)
            if mask is not None:
                diff = diff * mask.to(diff.device, diff.dtype)
            out.append(diff.sum())
        return torch.stack(out).unsqueeze(-1)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        kl = self.kl(tensordict).to(next_tensordict.get("reward").device)
        next_tensordict.set("kl_penalty", kl)
        if self.add_to_reward:
            next_tensordict.set("reward", next_tensordict.get("reward") - self.coef * kl)
        return next_tensordict
