"""``LSTMModule`` / ``GRUModule``: keys, step mode == sequence mode, primer, state_dict, errors."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from rl_kernels import GRUModule, LSTMModule, recurrent_mode, set_recurrent_mode

KINDS = {"lstm": (LSTMModule, ["recurrent_state_h", "recurrent_state_c"]), "gru": (GRUModule, ["recurrent_state"])}  # fmt: skip


def make(kind: str, **kwargs) -> LSTMModule | GRUModule:
    torch.manual_seed(0)
    cls, _ = KINDS[kind]
    kwargs = {"input_size": 3, "hidden_size": 6, "num_layers": 2, **kwargs}
    return cls(in_key="obs", out_key="feat", **kwargs)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_keys_follow_torchrl(kind: str) -> None:
    module = make(kind)
    states = KINDS[kind][1]
    assert module.in_keys == ["obs", *states, "is_init"]
    assert module.out_keys == ["feat", *(("next", s) for s in states)]
    custom = KINDS[kind][0](
        input_size=3,
        hidden_size=4,
        in_keys=["x", *(f"s{i}" for i in range(len(states)))],
        out_keys=["y", *(("next", f"s{i}") for i in range(len(states)))],
    )
    assert custom.in_keys[0] == "x" and custom.out_keys[0] == "y"


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_step_loop_equals_sequence_mode(kind: str) -> None:
    module = make(kind)
    states = KINDS[kind][1]
    b, t_len = 3, 8
    obs = torch.randn(b, t_len, 3)
    is_init = torch.rand(b, t_len, 1) < 0.25
    is_init[:, 0] = True
    is_init[1, -1] = True
    step = TensorDict(obs=obs[:, 0], is_init=is_init[:, 0], batch_size=[b])
    outs, nexts = [], []
    with torch.no_grad():
        for t in range(t_len):
            step["obs"], step["is_init"] = obs[:, t], is_init[:, t]
            out = module(step.clone())
            outs.append(out["feat"])
            nexts.append([out["next", s] for s in states])
            for s in states:
                step[s] = out["next", s]
        seq = TensorDict(obs=obs, is_init=is_init, batch_size=[b, t_len])
        with set_recurrent_mode(True):
            res = module(seq)
    torch.testing.assert_close(res["feat"], torch.stack(outs, 1))
    ends = torch.ones(b, t_len, dtype=torch.bool)
    ends[:, :-1] = is_init[:, 1:, 0]
    for j, s in enumerate(states):
        want = torch.stack([n[j] for n in nexts], 1)
        torch.testing.assert_close(res["next", s][ends], want[ends])  # state at trajectory ends
        assert (res["next", s][~ends] == 0).all()  # zeros elsewhere, as TorchRL


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_sequence_mode_starts_from_the_stored_state(kind: str) -> None:
    module = make(kind)
    states = KINDS[kind][1]
    obs = torch.randn(2, 5, 3)
    h0 = {s: torch.randn(2, 5, 2, 6) for s in states}
    is_init = torch.zeros(2, 5, 1, dtype=torch.bool)
    td = TensorDict(obs=obs, is_init=is_init, batch_size=[2, 5], **h0)
    with set_recurrent_mode(True), torch.no_grad():
        got = module(td)["feat"]
        hx = tuple(h0[s][:, 0].transpose(0, 1).contiguous() for s in states)
        want, _ = module.rnn(obs, hx if kind == "lstm" else hx[0])
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_state_dict_round_trip_with_nn_rnn(kind: str) -> None:
    module = make(kind)
    cls = nn.LSTM if kind == "lstm" else nn.GRU
    plain = cls(3, 6, 2, batch_first=True)
    module.rnn.load_state_dict(plain.state_dict())
    assert all(
        torch.equal(a, b) for a, b in zip(module.rnn.parameters(), plain.parameters(), strict=True)
    )
    other = cls(3, 6, 2, batch_first=True)
    other.load_state_dict(module.rnn.state_dict())
    assert all(
        torch.equal(a, b) for a, b in zip(other.parameters(), plain.parameters(), strict=True)
    )
    assert sorted(module.state_dict()) == sorted(f"{kind}.{k}" for k in plain.state_dict())
    wrapped = KINDS[kind][0](**{kind: plain}, in_key="obs", out_key="feat")
    assert wrapped.rnn is plain


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_primer_describes_the_states(kind: str) -> None:
    primer = make(kind).make_tensordict_primer()
    assert list(primer) == KINDS[kind][1]
    for spec in primer.values():
        assert spec.shape == (2, 6) and spec.dtype == torch.float32
    assert primer.reset_key == "is_init" and primer.default_value == 0.0
    assert primer[KINDS[kind][1][0]].zero((4,)).shape == (4, 2, 6)


def test_recurrent_mode_context_and_default() -> None:
    module = make("gru")
    assert recurrent_mode() is None and module.recurrent_mode is False
    with set_recurrent_mode("recurrent"):
        assert module.recurrent_mode is True
        with set_recurrent_mode(False):
            assert module.recurrent_mode is False
    assert make("gru", default_recurrent_mode=True).recurrent_mode is True
    with pytest.raises(ValueError, match="'recurrent' or 'sequential'"):
        set_recurrent_mode("sequence")


def test_missing_state_is_an_error_unless_every_env_just_reset() -> None:
    module = make("lstm")
    fresh = TensorDict(obs=torch.randn(2, 3), is_init=torch.ones(2, 1, dtype=torch.bool), batch_size=[2])  # fmt: skip
    assert module(fresh)["next", "recurrent_state_h"].shape == (2, 2, 6)
    mid = TensorDict(obs=torch.randn(2, 3), is_init=torch.zeros(2, 1, dtype=torch.bool), batch_size=[2])  # fmt: skip
    with pytest.raises(RuntimeError, match="make_tensordict_primer"):
        module(mid)
    zeros = mid.clone()
    zeros["recurrent_state_h"] = torch.zeros(2, 2, 6)
    zeros["recurrent_state_c"] = torch.zeros(2, 2, 6)
    with pytest.raises(RuntimeError, match="did not carry"):
        module(zeros)
    assert make("lstm", check_carried_state=False)(zeros)["feat"].shape == (2, 6)


def test_bad_input_errors_name_the_key() -> None:
    module = make("lstm")
    with pytest.raises(KeyError, match="'obs' not found"):
        module(TensorDict(x=torch.randn(2, 3), batch_size=[2]))
    with pytest.raises(ValueError, match="input_size=3"):
        module(TensorDict(obs=torch.randn(2, 4), is_init=torch.ones(2, 1, dtype=torch.bool), batch_size=[2]))  # fmt: skip
    with pytest.raises(TypeError, match="'is_init' must be bool"):
        module(TensorDict(obs=torch.randn(2, 3), is_init=torch.ones(2, 1), batch_size=[2]))
    with pytest.raises(ValueError, match=r"'is_init' must have shape \[\*B, 1\]"):
        module(TensorDict(obs=torch.randn(2, 3), is_init=torch.ones(2, dtype=torch.bool), batch_size=[2]))  # fmt: skip
    with set_recurrent_mode(True):
        with pytest.raises(KeyError, match="InitTracker"):
            module(TensorDict(obs=torch.randn(2, 4, 3), batch_size=[2, 4]))
        bad = TensorDict(obs=torch.randn(2, 4, 3), is_init=torch.ones(2, 4, dtype=torch.bool), batch_size=[2, 4])  # fmt: skip
        with pytest.raises(ValueError, match=r"is_init must have shape \[\*B, T, 1\]"):
            module(bad)


def test_constructor_errors() -> None:
    with pytest.raises(ValueError, match="backend must be"):
        make("lstm", backend="cudnn")
    with pytest.raises(ValueError, match="batch_first must be True"):
        make("gru", batch_first=False)
    with pytest.raises(ValueError, match="exactly one of in_key= or in_keys="):
        LSTMModule(3, 4, out_key="y")
    with pytest.raises(ValueError, match="pass input_size and hidden_size"):
        GRUModule(in_key="x", out_key="y")


def test_triton_backend_on_cpu_without_interpreter_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    module = make("gru", backend="triton")
    td = TensorDict(obs=torch.randn(2, 4, 3), is_init=torch.ones(2, 4, 1, dtype=torch.bool), batch_size=[2, 4])  # fmt: skip
    with set_recurrent_mode(True), pytest.raises(RuntimeError, match="backend='torch'"):
        module(td)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_triton_backend_module_equals_torch_backend(kind: str) -> None:
    pytest.importorskip("triton")  # interpreted on CPU (conftest)
    is_init = torch.rand(2, 5, 1) < 0.3
    is_init[:, 0] = True
    td = TensorDict(obs=torch.randn(2, 5, 3), is_init=is_init, batch_size=[2, 5])
    with set_recurrent_mode(True), torch.no_grad():
        a = make(kind, backend="triton")(td.clone())
        b = make(kind, backend="torch")(td.clone())
    for key in a.keys(True, True):
        torch.testing.assert_close(a[key], b[key])
