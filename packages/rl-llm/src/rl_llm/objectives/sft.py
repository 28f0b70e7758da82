"""``SFTLoss``: supervised fine-tuning on the assistant's tokens only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from tensordict import NestedKey, TensorClass, TensorDictBase

from rl_llm.data.history import History
from rl_llm.modules.base import LLMWrapperBase
from rl_llm.objectives._sequences import render_history
from rl_llm.objectives.functional import kl_k3


class SFTLossOutput(TensorClass["nocast"]):
    """What :class:`SFTLoss` returns."""

    loss_sft: torch.Tensor
    loss_kl_to_ref: torch.Tensor | None = None
    kl_to_ref: torch.Tensor | None = None

    def total(self) -> torch.Tensor:
        """``loss_sft`` plus the KL term when it is set."""
        return self.loss_sft if self.loss_kl_to_ref is None else self.loss_sft + self.loss_kl_to_ref


@dataclass(frozen=True)
class _AcceptedKeys:
    """Keys :class:`SFTLoss` reads."""

    history: NestedKey = ("history", "full")
    ref_log_prob: NestedKey = ("next", "ref_log_probs", "full")


class SFTLoss(torch.nn.Module):
    """Negative log-likelihood of the assistant's tokens of whole conversations.

    Each conversation at ``("history", "full")`` is rendered with the actor's chat
    template; the tokens inside ``{% generation %}`` blocks (assistant contents and
    their end tokens) are the targets, everything else is context. Per conversation
    the loss is the sum of ``-log p`` over targets, divided by their count when
    ``normalize_by_seq_length``; ``reduction`` then combines conversations.

    Args:
        actor_network: the trained policy (an :class:`~rl_llm.LLMWrapperBase`).
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` over conversations.
        normalize_by_seq_length: divide each conversation's loss by its number of target tokens. Defaults to ``True``.
        kl_to_ref_coeff: weight of a KL penalty (k3) to reference log-probs read at
            ``("next", "ref_log_probs", "full")`` (aligned with the rendered tokens); ``None`` disables it.

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_llm import ChatHistory, History, TransformersWrapper
        >>> from rl_llm.tiny import tiny_causal_lm, tiny_tokenizer
        >>> tok = tiny_tokenizer()
        >>> actor = TransformersWrapper(tiny_causal_lm(tok), tokenizer=tok, generate=False)
        >>> chats = History.from_chats([[{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}]])
        >>> td = TensorDict(history=ChatHistory(full=chats, batch_size=(1,)), batch_size=(1,))
        >>> SFTLoss(actor)(td).loss_sft.shape
        torch.Size([])
    """

    default_keys = _AcceptedKeys

    def __init__(
        self,
        actor_network: LLMWrapperBase,
        *,
        reduction: Literal["mean", "sum", "none"] = "mean",
        normalize_by_seq_length: bool = True,
        kl_to_ref_coeff: float | None = None,
    ) -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}.")
        if not hasattr(actor_network, "score"):
            raise TypeError(
                f"actor_network must be an LLMWrapperBase, got {type(actor_network).__name__}."
            )
        self.actor_network = actor_network
        self.reduction = reduction
        self.normalize_by_seq_length = normalize_by_seq_length
        self.kl_to_ref_coeff = kl_to_ref_coeff
        self.tensor_keys = _AcceptedKeys()

    def set_keys(self, **keys: NestedKey) -> SFTLoss:
        """Changes the keys read (``history``, ``ref_log_prob``)."""
        unknown = set(keys) - set(_AcceptedKeys.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"Unknown keys {sorted(unknown)}; accepted: {sorted(_AcceptedKeys.__dataclass_fields__)}."
            )
        self.tensor_keys = _AcceptedKeys(**{**self.tensor_keys.__dict__, **keys})
        return self

    def tokenize(self, history: History) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Renders conversations; returns right-padded tokens, attention and assistant masks ``[B, L]``."""
        return render_history(self.actor_network, history)

    def forward(self, tensordict: TensorDictBase) -> SFTLossOutput:
        """Computes the loss on a batch of conversations."""
        history = tensordict.get(self.tensor_keys.history, None)
        if not isinstance(history, History):
            raise KeyError(
                f"SFTLoss reads conversations (a History) at {self.tensor_keys.history!r}, got "
                f"{type(history).__name__}."
            )
        if history.batch_dims == 1:
            history = history.unsqueeze(0)
        tokens, attention, assistant = self.tokenize(history)
        if not bool(assistant.any(-1).all()):
            empty = (~assistant.any(-1)).nonzero().flatten().tolist()
            raise ValueError(
                f"Conversation(s) {empty} have no assistant message: nothing to train on."
            )
        log_prob = self.actor_network.score(tokens, attention)
        assistant = assistant.to(log_prob.device)
        count = assistant.sum(-1)
        per_seq = -(log_prob * assistant).sum(-1)
        if self.normalize_by_seq_length:
            per_seq = per_seq / count
        out = {"loss_sft": _reduce(per_seq, self.reduction)}
        if self.kl_to_ref_coeff is not None:
            ref = tensordict.get(
                self.tensor_keys.ref_log_prob,
                as_padded_tensor=True,
                padding_side="right",
                padding_value=0.0,
            ).to(log_prob.device)
            if ref.shape != log_prob.shape:
                raise ValueError(
                    f"{self.tensor_keys.ref_log_prob!r} must align with the rendered tokens {tuple(log_prob.shape)}, "
                    f"got {tuple(ref.shape)}."
                )
            kl = (kl_k3(log_prob, ref) * assistant).sum(-1) / count
            out["kl_to_ref"] = _reduce(kl, "mean").detach()
            out["loss_kl_to_ref"] = self.kl_to_ref_coeff * _reduce(kl, self.reduction)
        return SFTLossOutput(**out)


def _reduce(value: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return value.mean()
    if reduction == "sum":
        return value.sum()
    return value
