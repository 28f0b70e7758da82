"""Python LSTM / GRU (and cells) against torch's kernels; python_based= and is_init as the last in_key."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from rl_modules import GRU, LSTM, GRUCell, GRUModule, LSTMCell, LSTMModule, set_recurrent_mode


@pytest.mark.parametrize("batch_first", [True, False])
def test_python_lstm_and_gru_match_torch(batch_first):
    torch.manual_seed(0)
    x = torch.randn(4, 6, 3)
    n = 4 if batch_first else 6
    h0, c0 = torch.randn(2, n, 5), torch.randn(2, n, 5)
    lstm, ref = LSTM(3, 5, 2, batch_first=batch_first), nn.LSTM(3, 5, 2, batch_first=batch_first)
    ref.load_state_dict(lstm.state_dict())
    (y, (h, c)), (ry, (rh, rc)) = lstm(x, (h0, c0)), ref(x, (h0, c0))
    torch.testing.assert_close((y, h, c), (ry, rh, rc))
    gru, gref = GRU(3, 5, 2, batch_first=batch_first), nn.GRU(3, 5, 2, batch_first=batch_first)
    gref.load_state_dict(gru.state_dict())
    torch.testing.assert_close(gru(x, h0), gref(x, h0))
    torch.testing.assert_close(gru(x)[0], gref(x)[0])  # zero initial state by default
    with pytest.raises(ValueError, match="3-d input"):
        gru(torch.randn(6, 3))


def test_python_cells_match_torch_and_vmap():
    torch.manual_seed(0)
    x, h = torch.randn(4, 3), torch.randn(4, 5)
    cell, ref = LSTMCell(3, 5), nn.LSTMCell(3, 5)
    ref.load_state_dict(cell.state_dict())
    torch.testing.assert_close(cell(x, (h, h)), ref(x, (h, h)))
    gcell, gref = GRUCell(3, 5), nn.GRUCell(3, 5)
    gref.load_state_dict(gcell.state_dict())
    torch.testing.assert_close(gcell(x, h), gref(x, h))
    lstm = LSTM(3, 5)
    xs = torch.randn(2, 4, 7, 3)
    out = torch.vmap(lambda xi: lstm(xi)[0])(xs)
    torch.testing.assert_close(out, torch.stack([lstm(xi)[0] for xi in xs]))


@pytest.mark.parametrize("module_class", [LSTMModule, GRUModule])
def test_python_based_modules_match_the_kernel_based_ones(module_class):
    torch.manual_seed(0)
    fast = module_class(input_size=3, hidden_size=4, num_layers=2, in_key="obs", out_key="y")
    slow = module_class(
        input_size=3, hidden_size=4, num_layers=2, in_key="obs", out_key="y", python_based=True
    )
    assert isinstance(slow.rnn, (LSTM, GRU))
    slow.load_state_dict(fast.state_dict())
    is_init = torch.zeros(2, 6, 1, dtype=torch.bool)
    is_init[:, 0] = True
    is_init[0, 3] = True  # a reset inside the sequence
    states = {k: torch.zeros(2, 6, 2, 4) for k in fast.state_keys}
    td = TensorDict(obs=torch.randn(2, 6, 3), is_init=is_init, **states, batch_size=[2, 6])
    with set_recurrent_mode(True):
        a, b = fast(td.clone()), slow(td.clone())
    torch.testing.assert_close(a["y"], b["y"])
    converted = module_class(input_size=3, hidden_size=4, in_key="obs", out_key="y")
    before = converted(
        TensorDict(obs=torch.ones(5, 3), is_init=torch.ones(5, 1, dtype=torch.bool), batch_size=[5])
    )["y"]
    converted.make_python_based()
    assert isinstance(converted.rnn, (LSTM, GRU))
    after = converted(
        TensorDict(obs=torch.ones(5, 3), is_init=torch.ones(5, 1, dtype=torch.bool), batch_size=[5])
    )["y"]
    torch.testing.assert_close(before, after)
    converted.make_cudnn_based()
    assert type(converted.rnn) in (torch.nn.LSTM, torch.nn.GRU)
    back = converted(
        TensorDict(obs=torch.ones(5, 3), is_init=torch.ones(5, 1, dtype=torch.bool), batch_size=[5])
    )["y"]
    torch.testing.assert_close(before, back)


def test_is_init_as_the_last_in_key():
    gru = GRUModule(
        input_size=3,
        hidden_size=4,
        in_keys=["obs", "hidden", "first"],
        out_keys=["y", ("next", "hidden")],
    )
    assert gru.in_keys == ["obs", "hidden", "first"] and gru.is_init_key == "first"
    td = TensorDict(
        obs=torch.randn(5, 3),
        hidden=torch.randn(5, 1, 4),
        first=torch.ones(5, 1, dtype=torch.bool),
        batch_size=[5],
    )
    out = gru(td)
    # is_init all True: the stored hidden state is ignored (restart from zeros)
    ref, _ = gru.gru(td["obs"].unsqueeze(1), torch.zeros(1, 5, 4))
    torch.testing.assert_close(out["y"], ref.squeeze(1))
    lstm = LSTMModule(
        input_size=3,
        hidden_size=4,
        in_keys=["obs", "h", "c", "is_init"],
        out_keys=["y", "h2", "c2"],
    )
    assert lstm.in_keys == ["obs", "h", "c", "is_init"]
    with pytest.raises(ValueError, match="disagree"):
        GRUModule(
            input_size=3,
            hidden_size=4,
            in_keys=["obs", "h", "first"],
            out_keys=["y", "h2"],
            is_init_key="other",
        )
    with pytest.raises(ValueError, match="optionally followed by the is_init key"):
        GRUModule(input_size=3, hidden_size=4, in_keys=["obs", "h", "a", "b"], out_keys=["y", "h2"])


@pytest.mark.parametrize("module_class", [LSTMModule, GRUModule])
def test_python_based_module_with_resets_runs_under_vmap(module_class):
    # packed sequences are impossible for the Python RNNs: resets take the cell loop, built
    # from plain ops, so torch.vmap over stacked parameters works (ATen's lstm_cell has no rule)
    torch.manual_seed(0)
    kw = dict(input_size=3, hidden_size=4, in_key="obs", out_key="y", reset_path="packed")
    slow = module_class(python_based=True, **kw)
    fast = module_class(**kw)
    fast.load_state_dict(slow.state_dict())
    is_init = torch.zeros(2, 7, 1, dtype=torch.bool)
    is_init[:, 0] = True
    is_init[1, 4] = True
    states = {k: torch.zeros(2, 7, 1, 4) for k in slow.state_keys}
    td = TensorDict(obs=torch.randn(2, 7, 3), is_init=is_init, **states, batch_size=[2, 7])
    with set_recurrent_mode(True):
        ref = fast(td.clone())["y"]
        torch.testing.assert_close(slow(td.clone())["y"], ref)
        params = TensorDict.from_module(slow).expand(3).clone()

        def run(p: TensorDict) -> torch.Tensor:
            with p.to_module(slow):
                return slow(td.clone())["y"]

        out = torch.vmap(run, randomness="same")(params)
    torch.testing.assert_close(out, ref.expand(3, *ref.shape))
