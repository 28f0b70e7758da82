"""DistillationLoss: k3 per token, masked, per-sequence normalised, both directions."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_llm import ChatHistory, DistillationLoss, History, TransformersWrapper, k3_kl_token_estimate
from rl_llm.tiny import tiny_causal_lm, tiny_tokenizer


def _batch(student, teacher, mask):
    return TensorDict(
        {
            "student_lp": student,
            ("masks", "all_assistant_mask"): mask,
            ("masks", "all_attention_mask"): torch.ones_like(mask),
            ("next", "teacher_log_probs", "full"): teacher,
        },
        batch_size=student.shape[:-1],
    )


def _identity_student():
    return TensorDictModule(torch.nn.Identity(), ["student_lp"], [("log_probs", "full")])


@pytest.mark.parametrize("direction", ["reverse", "forward"])
def test_masked_normalised_k3_in_both_directions(direction):
    student = torch.tensor([[-1.0, -2.0, -0.5], [-0.2, -0.3, -3.0]], requires_grad=True)
    teacher = torch.tensor([[-1.5, -1.0, -0.5], [-0.1, -0.3, -1.0]])
    mask = torch.tensor([[False, True, True], [True, True, False]])
    out = DistillationLoss(_identity_student(), kl_direction=direction)(
        _batch(student, teacher, mask)
    )
    args = (teacher, student) if direction == "reverse" else (student, teacher)
    per_token = k3_kl_token_estimate(*args) * mask
    expected = (per_token.sum(-1) / mask.sum(-1)).mean()
    torch.testing.assert_close(out.loss_distill, expected)
    out.loss_distill.backward()
    assert student.grad is not None and not out.kl_to_teacher.requires_grad


def test_reductions_and_validation():
    student, mask = torch.full((2, 2, 3), -1.0), torch.ones(2, 2, 3, dtype=torch.bool)
    td = _batch(student, torch.full((2, 2, 3), -2.0), mask)
    per_seq = DistillationLoss(_identity_student(), reduction="none")(td).loss_distill
    assert per_seq.shape == (2, 2)
    mask[0, 1] = False
    with pytest.raises(ValueError, match="Some sequences"):
        DistillationLoss(_identity_student())(_batch(student, torch.full((2, 2, 3), -2.0), mask))
    with pytest.raises(ValueError, match="kl_direction"):
        DistillationLoss(None, kl_direction="sideways")
    with pytest.raises(ValueError, match="reduction"):
        DistillationLoss(None, reduction="average")


def test_zero_when_teacher_is_the_student_wrapper():
    tok = tiny_tokenizer()
    wrapper = TransformersWrapper(tiny_causal_lm(tok), tokenizer=tok, generate=False)
    history = History.from_chats(
        [[{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}]]
    )
    td = TensorDict(history=ChatHistory(full=history, batch_size=(1,)), batch_size=(1,))
    scored = wrapper(td.copy())
    teacher = scored.get(("log_probs", "full"), as_padded_tensor=True).detach()
    td.set(("next", "teacher_log_probs", "full"), teacher)
    loss = DistillationLoss(wrapper)(td).loss_distill
    torch.testing.assert_close(loss, torch.zeros(()), atol=1e-6, rtol=0)
