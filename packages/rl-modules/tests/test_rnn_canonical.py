"""canonicalize_rnn_subset and LSTMModule / GRUModule.canonicalize: row-major layout for the
module's entries only."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_modules import GRUModule, LSTMModule, canonicalize_rnn_subset


def row_major(t: torch.Tensor) -> bool:
    expected, running = [], 1
    for size in reversed(t.shape):
        expected.append(running)
        running *= size
    return tuple(t.stride()) == tuple(reversed(expected))


def batch(nested: bool) -> tuple[TensorDict, object]:
    key = ("agent", "obs") if nested else "obs"
    obs = torch.randn(5, 2, 3).transpose(0, 1)  # [2, 5, 3], not row-major
    reward = torch.randn(5, 2, 1).transpose(0, 1)
    td = TensorDict(batch_size=[2, 5])
    td.set(key, obs)
    td.set("reward", reward)
    return td, key


@pytest.mark.parametrize("nested", [False, True])
def test_only_the_module_entries_are_relaid(nested):
    td, key = batch(nested)
    obs, reward = td.get(key), td["reward"]
    lstm = LSTMModule(input_size=3, hidden_size=4, in_key=key, out_key="out")
    out = lstm.canonicalize(td)
    assert row_major(out.get(key)) and torch.equal(out.get(key), obs)
    assert out["reward"] is reward  # untouched, no copy
    assert td.get(key) is obs  # not in place: the input keeps its entries
    assert lstm.canonicalize(td, inplace=True) is td and row_major(td.get(key))


def test_union_of_several_modules_and_row_major_entries_kept():
    td = TensorDict(
        a=torch.randn(5, 2, 3).transpose(0, 1),
        b=torch.randn(2, 5, 3),
        c=torch.randn(5, 2, 3).transpose(0, 1),
        batch_size=[2, 5],
    )
    b = td["b"]
    lstm = LSTMModule(input_size=3, hidden_size=4, in_key="a", out_key="ha")
    gru = GRUModule(input_size=3, hidden_size=4, in_key="b", out_key="hb")
    out = canonicalize_rnn_subset(td, [lstm, gru])
    assert row_major(out["a"]) and out["b"] is b and not row_major(out["c"])
    assert gru.canonical_keys == [*gru.in_keys, *gru.out_keys]


def test_a_size_one_dim_with_an_odd_stride_is_relaid():
    h = torch.randn(4, 1, 8).as_strided((4, 1, 8), (8, 1, 1))  # is_contiguous() yet not row-major
    assert h.is_contiguous() and not row_major(h)
    gru = GRUModule(input_size=8, hidden_size=8, in_key="x", out_key="y")
    out = gru.canonicalize(TensorDict(x=h, batch_size=[4]))
    assert row_major(out["x"]) and torch.equal(out["x"], h)
