"""LSTMModule / GRUModule against a plain-torch step-by-step loop written from the gate equations."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_modules import GRUModule, LSTMModule, RecurrentStatePrimer, set_recurrent_mode
from rl_modules.recurrent._segments import split_at_resets
from rl_modules.recurrent.mode import recurrent_mode


def _lstm_cell(rnn, layer, x, h, c):
    w_ih, w_hh = getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"weight_hh_l{layer}")
    gates = (
        x @ w_ih.T
        + getattr(rnn, f"bias_ih_l{layer}")
        + h @ w_hh.T
        + getattr(rnn, f"bias_hh_l{layer}")
    )
    i, f, g, o = gates.chunk(4, -1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def _gru_cell(rnn, layer, x, h):
    gi = x @ getattr(rnn, f"weight_ih_l{layer}").T + getattr(rnn, f"bias_ih_l{layer}")
    gh = h @ getattr(rnn, f"weight_hh_l{layer}").T + getattr(rnn, f"bias_hh_l{layer}")
    ir, iz, in_ = gi.chunk(3, -1)
    hr, hz, hn = gh.chunk(3, -1)
    r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
    n = torch.tanh(in_ + r * hn)
    return (1 - z) * n + z * h


def reference_loop(rnn, x, is_init, states):
    """Step-by-step loop: states [N, L, H] per state; reset to zero where is_init [N, T]."""
    t = x.shape[1]
    states = [s.clone() for s in states]
    ys, finals = [], []
    for step in range(t):
        keep = (~is_init[:, step]).to(x.dtype)[:, None, None]
        states = [s * keep for s in states]
        inp = x[:, step]
        new = [[] for _ in states]
        for layer in range(rnn.num_layers):
            if len(states) == 2:
                h, c = _lstm_cell(rnn, layer, inp, states[0][:, layer], states[1][:, layer])
                new[0].append(h)
                new[1].append(c)
            else:
                h = _gru_cell(rnn, layer, inp, states[0][:, layer])
                new[0].append(h)
            inp = h
        states = [torch.stack(s, 1) for s in new]
        ys.append(inp)
        finals.append(states)
    return torch.stack(ys, 1), finals


def _make(kind, num_layers, reset_path="auto"):
    torch.manual_seed(0)
    cls = LSTMModule if kind == "lstm" else GRUModule
    return cls(
        input_size=3,
        hidden_size=5,
        num_layers=num_layers,
        in_key="obs",
        out_key="out",
        reset_path=reset_path,
    )


def _is_init(n, t, with_resets):
    g = torch.Generator().manual_seed(1)
    is_init = torch.rand(n, t, generator=g) < (0.15 if with_resets else 0.0)
    is_init[0, 0] = True  # a row starting a trajectory
    if with_resets:
        is_init[1, 3] = True
    return is_init


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize(
    ("with_resets", "reset_path"),
    [(False, "auto"), (True, "loop"), (True, "packed")],
)
def test_sequence_mode_matches_step_loop_values_and_grads(
    kind, num_layers, with_resets, reset_path
):
    module = _make(kind, num_layers, reset_path)
    n, t = 4, 9
    x = torch.randn(n, t, 3, requires_grad=True)
    is_init = _is_init(n, t, with_resets)
    init_states = [torch.randn(n, num_layers, 5) for _ in module.state_keys]
    td = TensorDict(obs=x, is_init=is_init.unsqueeze(-1), batch_size=[n, t])
    for key, s in zip(module.state_keys, init_states, strict=True):
        td.set(key, s.unsqueeze(1).expand(n, t, num_layers, 5).clone())
    with set_recurrent_mode(True):
        out = module(td)
    y_ref, finals = reference_loop(module.rnn, x, is_init, init_states)
    torch.testing.assert_close(out["out"], y_ref, rtol=1e-5, atol=1e-5)

    # Next states: the state after the last step of each segment, at that step.
    ends = torch.zeros(n, t, dtype=torch.bool)
    ends[:, -1] = True
    ends[:, :-1] |= is_init[:, 1:]
    for i, key in enumerate(module.next_state_keys):
        got = out[key]
        for b, s in ends.nonzero().tolist():
            torch.testing.assert_close(got[b, s], finals[s][i][b], rtol=1e-5, atol=1e-5)

    w = torch.randn_like(y_ref)
    params = list(module.parameters())
    g_mod = torch.autograd.grad((out["out"] * w).sum(), [x, *params])
    g_ref = torch.autograd.grad((y_ref * w).sum(), [x, *params])
    for a, b in zip(g_mod, g_ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("reset_path", ["loop", "packed"])
def test_step_by_step_module_equals_sequence_mode(kind, reset_path):
    module = _make(kind, 2, reset_path)
    n, t = 3, 12
    x = torch.randn(n, t, 3)
    is_init = _is_init(n, t, True)
    is_init[:, 0] = True
    outs = []
    carried = TensorDict(batch_size=[n])
    states_seen = {k: [] for k in module.state_keys}
    for step in range(t):
        td = TensorDict(obs=x[:, step], is_init=is_init[:, step, None], batch_size=[n])
        td.update(carried)
        for k in module.state_keys:
            states_seen[k].append(td.get(k, torch.zeros(n, 2, 5)))
        td = module(td)
        outs.append(td["out"])
        carried = TensorDict({k: td["next", k] for k in module.state_keys}, batch_size=[n])
    seq = TensorDict(obs=x, is_init=is_init.unsqueeze(-1), batch_size=[n, t])
    for k in module.state_keys:
        seq.set(k, torch.stack(states_seen[k], 1))
    with set_recurrent_mode(True):
        seq = module(seq)
    torch.testing.assert_close(seq["out"], torch.stack(outs, 1), rtol=1e-5, atol=1e-5)


def test_sequence_starting_mid_trajectory_uses_stored_state():
    module = _make("lstm", 1)
    n, t = 2, 6
    x = torch.randn(n, t, 3)
    is_init = torch.zeros(n, t, dtype=torch.bool)
    h0, c0 = torch.randn(n, 1, 5), torch.randn(n, 1, 5)
    td = TensorDict(
        obs=x,
        is_init=is_init.unsqueeze(-1),
        recurrent_state_h=h0.unsqueeze(1).expand(n, t, 1, 5),
        recurrent_state_c=c0.unsqueeze(1).expand(n, t, 1, 5),
        batch_size=[n, t],
    )
    with set_recurrent_mode(True):
        y = module(td)["out"]
    y_ref, _ = reference_loop(module.rnn, x, is_init, [h0, c0])
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)


def test_step_without_state_and_all_init_starts_from_zero():
    module = _make("gru", 1)
    x = torch.randn(4, 3)
    td = module(TensorDict(obs=x, is_init=torch.ones(4, 1, dtype=torch.bool), batch_size=[4]))
    y_ref, _ = reference_loop(
        module.rnn, x[:, None], torch.ones(4, 1, dtype=torch.bool), [torch.zeros(4, 1, 5)]
    )
    torch.testing.assert_close(td["out"], y_ref[:, 0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "is_init",
    [None, torch.tensor([[True], [False]])],
    ids=["is_init-absent", "is_init-not-all-true"],
)
def test_step_without_carried_state_warns_once_or_raises(is_init):
    module = _make("lstm", 1)
    td = TensorDict(obs=torch.randn(2, 3), batch_size=[2])
    if is_init is not None:
        td.set("is_init", is_init)
    # TorchRL's behaviour: start from zeros; said once
    with pytest.warns(UserWarning, match="does not carry the policy's state"):
        out = module(td.clone())
    ref, _ = module.lstm(td["obs"].unsqueeze(1))
    torch.testing.assert_close(out["out"], ref.squeeze(1))
    module(td.clone())  # no second warning (warnings are errors in this suite)
    module.missing_state = "raise"
    with pytest.raises(RuntimeError, match="does not carry the policy's state"):
        module(td.clone())


def test_recurrent_backend_names_map_to_reset_paths():
    lstm = LSTMModule(input_size=3, hidden_size=4, in_key="x", out_key="y", recurrent_backend="pad")
    assert lstm.reset_path == "packed"
    assert (
        GRUModule(
            input_size=3, hidden_size=4, in_key="x", out_key="y", recurrent_backend="auto"
        ).reset_path
        == "auto"
    )
    with pytest.raises(ValueError, match="rl-kernels"):
        GRUModule(input_size=3, hidden_size=4, in_key="x", out_key="y", recurrent_backend="triton")
    with pytest.raises(ValueError, match="recurrent_backend must be one of"):
        GRUModule(input_size=3, hidden_size=4, in_key="x", out_key="y", recurrent_backend="other")


def test_sequence_mode_needs_is_init_and_time_dim():
    module = _make("lstm", 1)
    td = TensorDict(obs=torch.randn(2, 4, 3), batch_size=[2, 4])
    with set_recurrent_mode(True), pytest.raises(KeyError, match="is_init"):
        module(td)
    td = TensorDict(obs=torch.randn(3), is_init=torch.ones(1, dtype=torch.bool), batch_size=[])
    with set_recurrent_mode(True), pytest.raises(ValueError, match=r"\[\*B, T\]"):
        module(td)


def test_sequence_mode_without_batch_dims():
    module = _make("gru", 1)
    x = torch.randn(7, 3)
    is_init = torch.zeros(7, dtype=torch.bool)
    is_init[0] = is_init[4] = True
    td = TensorDict(obs=x, is_init=is_init.unsqueeze(-1), batch_size=[7])
    with set_recurrent_mode(True):
        y = module(td)["out"]
    y_ref, _ = reference_loop(module.rnn, x[None], is_init[None], [torch.zeros(1, 1, 5)])
    torch.testing.assert_close(y, y_ref[0], rtol=1e-5, atol=1e-5)


def test_missing_input_key_is_named():
    module = _make("gru", 1)
    with pytest.raises(KeyError, match="'obs'"):
        module(TensorDict(observation=torch.randn(2, 3), batch_size=[2]))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_primer_description(kind):
    module = _make(kind, 2)
    primer = module.make_tensordict_primer()
    assert isinstance(primer, RecurrentStatePrimer)
    assert list(primer) == module.state_keys
    for spec in primer.values():
        assert spec.shape == torch.Size([2, 5])
        assert spec.zero((3,)).shape == torch.Size([3, 2, 5])

    class FakePrimer:
        def __init__(self, specs, default_value, expand_specs):
            self.specs, self.default_value = specs, default_value

    class FakeSpec:
        def __init__(self, shape, dtype, device):
            self.shape = shape

    built = module.make_tensordict_primer(FakePrimer, FakeSpec)
    assert set(built.specs) == set(module.state_keys)
    assert built.default_value == 0.0


def test_recurrent_mode_context_nests():
    assert recurrent_mode() is None
    with set_recurrent_mode(True):
        assert recurrent_mode() is True
        with set_recurrent_mode("sequential"):
            assert recurrent_mode() is False
        assert recurrent_mode() is True
    assert recurrent_mode() is None


def test_split_at_resets_layout():
    is_init = torch.tensor([[True, False, True], [False, False, False], [False, True, True]])
    seg = split_at_resets(is_init)
    assert seg.seg_id.tolist() == [[0, 0, 1], [2, 2, 2], [3, 4, 5]]
    assert seg.pos.tolist() == [[0, 1, 0], [0, 1, 2], [0, 0, 0]]
    assert seg.lengths.tolist() == [2, 1, 3, 1, 1, 1]
    assert seg.last.tolist() == [[0, 1], [0, 2], [1, 2], [2, 0], [2, 1], [2, 2]]
    assert seg.first.tolist() == [0, 2, 3]


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="in_key"):
        LSTMModule(input_size=3, hidden_size=4, out_key="out")
    with pytest.raises(ValueError, match="batch_first"):
        LSTMModule(lstm=torch.nn.LSTM(3, 4), in_key="obs", out_key="out")
    with pytest.raises(ValueError, match="reset_path"):
        GRUModule(input_size=3, hidden_size=4, in_key="obs", out_key="out", reset_path="fast")


def test_nested_keys_and_batch_dims():
    module = LSTMModule(
        input_size=3,
        hidden_size=4,
        in_keys=[("agent", "obs"), ("agent", "h"), ("agent", "c")],
        out_keys=[("agent", "out"), ("next", "agent", "h"), ("next", "agent", "c")],
    )
    td = TensorDict(
        {"agent": {"obs": torch.randn(2, 3, 3)}, "is_init": torch.ones(2, 3, 1, dtype=torch.bool)},
        batch_size=[2, 3],
    )
    td = module(td)
    assert td["next", "agent", "h"].shape == torch.Size([2, 3, 1, 4])
    assert td["agent", "out"].shape == torch.Size([2, 3, 4])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_step_with_zero_state_after_first_step_raises(kind):
    """An env that re-injects zeros instead of carrying ("next", state) is caught."""
    module = _make(kind, 1)
    td = TensorDict(
        obs=torch.randn(2, 3), is_init=torch.ones(2, 1, dtype=torch.bool), batch_size=[2]
    )
    td = module(td)
    # Broken env: the next root holds zeros instead of the state the module wrote.
    nxt = TensorDict(
        obs=torch.randn(2, 3), is_init=torch.zeros(2, 1, dtype=torch.bool), batch_size=[2]
    )
    for k in module.state_keys:
        nxt.set(k, torch.zeros_like(td["next", k]))
    with pytest.raises(RuntimeError, match="did not carry the state"):
        module(nxt.clone())
    module.check_carried_state = False
    module(nxt.clone())
    # A correct env carries the written state: no error.
    module.check_carried_state = True
    for k in module.state_keys:
        nxt.set(k, td["next", k])
    module(nxt)


@pytest.mark.parametrize("cls", [LSTMModule, GRUModule])
def test_recurrent_modules_take_tensors_as_keywords(cls):
    torch.manual_seed(0)
    m = cls(input_size=3, hidden_size=5, in_key="obs", out_key="feat", default_recurrent_mode=True)
    obs = torch.randn(4, 6, 3)
    is_init = torch.zeros(4, 6, 1, dtype=torch.bool)
    is_init[:, 0] = True
    states = {k: torch.zeros(4, 6, 1, 5) for k in m.in_keys[1:-1]}
    outs = m(obs=obs, is_init=is_init, **states)
    td = m(TensorDict(obs=obs, is_init=is_init, **states, batch_size=[4, 6]))
    assert isinstance(outs, tuple) and len(outs) == len(m.out_keys)
    torch.testing.assert_close(outs[0], td["feat"])
    # the output of a plain torch RNN run from zeros over the whole sequence
    rnn = m.lstm if cls is LSTMModule else m.gru
    ref, _ = rnn(obs)
    torch.testing.assert_close(outs[0], ref)


@pytest.mark.parametrize("cls", [LSTMModule, GRUModule])
def test_a_string_for_in_keys_or_out_keys_is_a_type_error(cls):
    with pytest.raises(TypeError, match="in_keys must be a list of keys"):
        cls(input_size=3, hidden_size=4, in_keys="abc", out_key="y")
    with pytest.raises(TypeError, match="out_keys must be a list of keys"):
        cls(input_size=3, hidden_size=4, in_key="x", out_keys="abc")
