"""LMHeadActorValueOperator on a tiny stand-in language model, against plain torch."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from rl_modules import ExplorationType, LMHeadActorValueOperator, set_exploration_type


class Trunk(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(12, 6)
        self.mix = nn.Linear(6, 6)

    def forward(self, input_ids, attention_mask):
        h = self.mix(self.embed(input_ids)) * attention_mask.unsqueeze(-1)
        return h, h.sum()


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.transformer, self.lm_head = Trunk(), nn.Linear(6, 12)


def test_heads_read_the_last_hidden_state():
    torch.manual_seed(0)
    lm = TinyLM()
    op = LMHeadActorValueOperator(lm)
    assert op.module[0][0].module is lm.transformer and op.module[1][0].module is lm.lm_head
    assert op.module[1].out_keys == ["logits", "action", "action_log_prob"]
    ids, mask = torch.randint(12, (5, 4)), torch.ones(5, 4)
    with set_exploration_type(ExplorationType.RANDOM):
        out = op(TensorDict(input_ids=ids, attention_mask=mask, batch_size=[5]))
    last = lm.transformer(ids, mask)[0][:, -1]
    logits = lm.lm_head(last)
    torch.testing.assert_close(out["logits"], logits)
    expected_lp = torch.log_softmax(logits, -1).gather(-1, out["action"].unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(out["action_log_prob"], expected_lp)
    value = op.module[2].module
    assert value.in_features == 6 and value.out_features == 1 and value.bias is None
    torch.testing.assert_close(out["state_value"], value(last))
    value_op = op.get_value_operator()
    assert set(value_op.parameters()) == set(op.module[0].parameters()) | set(value.parameters())


def test_a_model_without_lm_head_is_named():
    with pytest.raises(TypeError, match=r"linear \.lm_head"):
        LMHeadActorValueOperator(nn.Linear(2, 2))
