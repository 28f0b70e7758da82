"""``DistillationLoss``: token-level distillation of a student policy toward a teacher's log-probs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from tensordict import NestedKey, TensorClass, TensorDictBase

from rl_llm.data.history import History
from rl_llm.objectives._sequences import get_dense, render_history
from rl_llm.objectives.functional import k3_kl_token_estimate


class DistillationLossOutput(TensorClass["nocast"]):
    """What :class:`DistillationLoss` returns: the loss and the detached mean KL (for logging)."""

    loss_distill: torch.Tensor
    kl_to_teacher: torch.Tensor


@dataclass(frozen=True)
class _AcceptedKeys:
    """Keys :class:`DistillationLoss` reads."""

    history: NestedKey = ("history", "full")
    teacher_log_prob: NestedKey = ("next", "teacher_log_probs", "full")
    log_probs: NestedKey = ("log_probs", "full")


class DistillationLoss(torch.nn.Module):
    """Pulls a student's per-token log-probs toward a teacher's (on-policy distillation).

    Agarwal et al. 2024, "On-Policy Distillation of Language Models" (arXiv:2306.13649).
    Each scored token contributes Schulman's k3 estimate (:func:`k3_kl_token_estimate`):
    ``kl_direction="reverse"`` estimates ``KL(student || teacher)`` (tokens sampled
    from the student), ``"forward"`` ``KL(teacher || student)`` (tokens sampled from the
    teacher). Gradients flow through the student's log-probs only.

    The teacher's log-probs are read at ``("next", "teacher_log_probs", "full")``,
    aligned with the tokens of the rendered conversation. The student's come from
    ``actor_network``: an :class:`~rl_llm.LLMWrapperBase` scores the conversation at
    ``("history", "full")`` (rendered with its template; masks from the rendering), and
    any other TensorDict module is called on the batch and must write
    ``("log_probs", "full")``, the masks then being read from
    ``("masks", "all_assistant_mask")`` / ``("masks", "all_attention_mask")``.

    Args:
        actor_network: the student.
        kl_direction: ``"reverse"`` (default) or ``"forward"``.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` over sequences.
        normalize_by_seq_length: divide each sequence's KL by its scored-token count.
        assistant_only: score only the assistant's tokens (default) or every real token.

    Raises:
        ValueError: for an unknown ``kl_direction`` / ``reduction``; in ``forward``, for
            misaligned log-probs or a sequence without scored tokens.

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> student = TensorDictModule(torch.nn.Identity(), [("lp",)], [("log_probs", "full")])
        >>> td = TensorDict({"lp": torch.full((2, 3), -1.0),
        ...                  ("masks", "all_assistant_mask"): torch.ones(2, 3, dtype=torch.bool),
        ...                  ("next", "teacher_log_probs", "full"): torch.full((2, 3), -1.0)}, [2])
        >>> DistillationLoss(student)(td).loss_distill
        tensor(0.)
    """

    default_keys = _AcceptedKeys

    def __init__(
        self,
        actor_network: Any,
        *,
        kl_direction: Literal["reverse", "forward"] = "reverse",
        reduction: Literal["mean", "sum", "none"] = "mean",
        normalize_by_seq_length: bool = True,
        assistant_only: bool = True,
    ) -> None:
        super().__init__()
        if kl_direction not in ("reverse", "forward"):
            raise ValueError(f"kl_direction must be 'reverse' or 'forward', got {kl_direction!r}.")
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}.")
        self.actor_network = actor_network
        self.kl_direction = kl_direction
        self.reduction = reduction
        self.normalize_by_seq_length = normalize_by_seq_length
        self.assistant_only = assistant_only
        self.tensor_keys = _AcceptedKeys()

    def set_keys(self, **keys: NestedKey) -> DistillationLoss:
        """Changes the keys read (``history``, ``teacher_log_prob``, ``log_probs``)."""
        unknown = set(keys) - set(_AcceptedKeys.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"Unknown keys {sorted(unknown)}; accepted: {sorted(_AcceptedKeys.__dataclass_fields__)}."
            )
        self.tensor_keys = _AcceptedKeys(**{**self.tensor_keys.__dict__, **keys})
        return self

    def _student(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """The student's per-token log-probs and the mask of scored tokens."""
        history = td.get(self.tensor_keys.history, None)
        if hasattr(self.actor_network, "score") and isinstance(history, History):
            history = history.unsqueeze(0) if history.batch_dims == 1 else history
            tokens, attention, assistant = render_history(self.actor_network, history)
            log_prob = self.actor_network.score(tokens, attention)
            mask = assistant if self.assistant_only else attention.bool()
            return log_prob, mask.to(log_prob.device)
        out = self.actor_network(td.copy())
        log_prob = get_dense(out, self.tensor_keys.log_probs, 0.0)
        name = "all_assistant_mask" if self.assistant_only else "all_attention_mask"
        mask = get_dense(td, ("masks", name), False).bool()
        return log_prob, mask.to(log_prob.device)

    def forward(self, tensordict: TensorDictBase) -> DistillationLossOutput:
        """Computes the loss on a batch of sequences (any batch shape)."""
        student, mask = self._student(tensordict)
        teacher = get_dense(tensordict, self.tensor_keys.teacher_log_prob, 0.0).to(student)
        if teacher.shape != student.shape or mask.shape != student.shape:
            raise ValueError(
                f"The teacher's log-probs {tuple(teacher.shape)} at {self.tensor_keys.teacher_log_prob!r}, the "
                f"student's {tuple(student.shape)} and the token mask {tuple(mask.shape)} must align token by "
                "token: score both models on the same rendered conversation."
            )
        teacher = teacher.detach()
        if self.kl_direction == "reverse":
            per_token = k3_kl_token_estimate(teacher, student)
        else:
            per_token = k3_kl_token_estimate(student, teacher)
        count = mask.sum(-1)
        if bool((count == 0).any()):
            empty = (count == 0).nonzero().tolist()
            raise ValueError(
                f"Some sequences have no scored token (batch index {empty}); with assistant_only="
                f"{self.assistant_only} every sequence needs at least one "
                f"{'assistant' if self.assistant_only else 'real'} token."
            )
        per_seq = torch.where(mask, per_token, per_token.new_zeros(())).sum(-1)
        if self.normalize_by_seq_length:
            per_seq = per_seq / count
        if self.reduction == "mean":
            loss = per_seq.mean()
        elif self.reduction == "sum":
            loss = per_seq.sum()
        else:
            loss = per_seq
        return DistillationLossOutput(loss_distill=loss, kl_to_teacher=per_seq.mean().detach())
