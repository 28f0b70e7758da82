"""``lstm_with_resets`` / ``gru_with_resets`` against a per-step ``nn.LSTMCell`` / ``nn.GRUCell`` loop.

The reference below is written independently of the package: a plain Python loop over
time and layers calling the torch cells (through ``functional_call`` so the gradients
reach the same ``nn.LSTM`` / ``nn.GRU`` parameters), replacing the state by the reset
state wherever ``is_init``. Triton runs in its interpreter (conftest sets TRITON_INTERPRET=1).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn
from torch.func import functional_call

from rl_kernels import gru_with_resets, lstm_with_resets, rnn_weights
from rl_kernels.recurrent import _backend

HAS_TRITON = _backend.triton_available()
BACKENDS = ["torch", pytest.param("triton", marks=pytest.mark.skipif(not HAS_TRITON, reason="no triton"))]  # fmt: skip


def loop_reference(kind, rnn, x, is_init, hx=None, reset_state=None):
    """``(y [N, T, H], h [N, T, L, H], c or None)`` by stepping torch's cells one step at a time."""
    n, t_len, _ = x.shape
    layers, hid = rnn.num_layers, rnn.hidden_size
    zeros = [x.new_zeros(n, hid) for _ in range(layers)]

    def per_layer(s):
        return list(s.unbind(0)) if s is not None else list(zeros)

    n_states = 2 if kind == "lstm" else 1
    hx = hx if kind == "lstm" or hx is None else (hx,)
    reset_state = reset_state if kind == "lstm" or reset_state is None else (reset_state,)
    state = [per_layer(None if hx is None else hx[j]) for j in range(n_states)]
    reset = [per_layer(None if reset_state is None else reset_state[j]) for j in range(n_states)]
    cells, params = [], []
    for k in range(layers):
        size_in = rnn.input_size if k == 0 else hid
        cell_class = nn.LSTMCell if kind == "lstm" else nn.GRUCell
        cells.append(cell_class(size_in, hid, bias=rnn.bias, device="meta"))
        names = (
            ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
            if rnn.bias
            else ("weight_ih", "weight_hh")
        )
        params.append({name: getattr(rnn, f"{name}_l{k}") for name in names})
    ys, steps = [], [[] for _ in range(n_states)]
    for t in range(t_len):
        inp = x[:, t]
        for k in range(layers):
            for j in range(n_states):
                state[j][k] = torch.where(is_init[:, t], reset[j][k], state[j][k])
            if kind == "lstm":
                out = functional_call(cells[k], params[k], (inp, (state[0][k], state[1][k])))
            else:
                out = (functional_call(cells[k], params[k], (inp, state[0][k])),)
            for j in range(n_states):
                state[j][k] = out[j]
            inp = out[0]
        ys.append(inp)
        for j in range(n_states):
            steps[j].append(torch.stack(state[j], 1))
    y = torch.stack(ys, 1)
    per_step = [torch.stack(s, 1) for s in steps]
    return y, per_step[0], per_step[1] if kind == "lstm" else None


def run(kind, x, is_init, rnn, hx=None, reset_state=None, backend="torch"):
    fn = lstm_with_resets if kind == "lstm" else gru_with_resets
    y, states = fn(x, is_init, rnn_weights(rnn), hx, reset_state=reset_state, backend=backend)
    return (y, *states) if kind == "lstm" else (y, states, None)


def make(kind, in_size=3, hid=5, layers=2, dtype=torch.float64, bias=True):
    torch.manual_seed(0)
    cls = nn.LSTM if kind == "lstm" else nn.GRU
    return cls(in_size, hid, layers, bias=bias, batch_first=True, dtype=dtype)


def random_resets(shape, t_len, seed=1):
    g = torch.Generator().manual_seed(seed)
    is_init = torch.rand(*shape, t_len, 1, generator=g) < 0.3
    is_init[..., 0, :] = True  # a reset at t = 0 ...
    flat = is_init.reshape(-1, t_len)
    flat[0, 0] = False  # ... except one row starting from hx
    flat[-1, -1] = True  # and a reset at the last step
    return is_init


def states_like(kind, rnn, batch, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    shape = (rnn.num_layers, *batch, rnn.hidden_size)
    if kind == "lstm":
        return tuple(torch.randn(*shape, generator=g, dtype=dtype) for _ in range(2))
    return torch.randn(*shape, generator=g, dtype=dtype)


def _flat(tensors):
    out = []
    for t in tensors:
        out.extend(t if isinstance(t, tuple) else [t])
    return out


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("layers", [1, 3])
def test_without_resets_equals_nn_rnn(kind: str, layers: int) -> None:
    rnn = make(kind, layers=layers, dtype=torch.float32)
    x = torch.randn(4, 7, 3)
    hx = states_like(kind, rnn, (4,), torch.float32, 2)
    y_ref, h_ref = rnn(x, hx)
    y, h, c = run(kind, x, torch.zeros(4, 7, 1, dtype=torch.bool), rnn, hx)
    torch.testing.assert_close(y, y_ref)
    h_n = h_ref[0] if kind == "lstm" else h_ref
    torch.testing.assert_close(h[:, -1].transpose(0, 1), h_n)
    if kind == "lstm":
        torch.testing.assert_close(c[:, -1].transpose(0, 1), h_ref[1])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch", [(), (4,), (2, 3)], ids=["B=[]", "B=[4]", "B=[2,3]"])
def test_values_and_gradients_equal_the_cell_loop(kind: str, backend: str, batch: tuple) -> None:
    rnn = make(kind)
    t_len = 5
    x = torch.randn(*batch, t_len, 3, dtype=torch.float64, requires_grad=True)
    is_init = random_resets(batch, t_len)
    hx = states_like(kind, rnn, batch, torch.float64, 3)
    rs = states_like(kind, rnn, batch, torch.float64, 4)
    leaves = [x, *rnn.parameters(), *_flat([hx, rs])]
    for leaf in leaves:
        leaf.requires_grad_(True)

    def loss_and_grads(outputs):
        y, h, c = outputs
        loss = (y.sin() * 1.3).sum() + h.cos().sum() + (0 if c is None else (c * c).sum())
        return [o.detach() for o in outputs if o is not None], torch.autograd.grad(loss, leaves)

    n = max(1, int(torch.Size(batch).numel()))
    flat = lambda s: None if s is None else s.reshape(s.shape[0], n, -1)  # noqa: E731
    ref_hx = tuple(map(flat, hx)) if kind == "lstm" else flat(hx)
    ref_rs = tuple(map(flat, rs)) if kind == "lstm" else flat(rs)
    ref = loop_reference(
        kind, rnn, x.reshape(n, t_len, 3), is_init.reshape(n, t_len, 1), ref_hx, ref_rs
    )
    ref = [None if r is None else r.reshape(*batch, *r.shape[1:]) for r in ref]
    want_out, want_grads = loss_and_grads(ref)
    got_out, got_grads = loss_and_grads(run(kind, x, is_init, rnn, hx, rs, backend))
    for got, want in zip(got_out + list(got_grads), want_out + list(want_grads), strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_gradcheck_torch_float64(kind: str) -> None:
    rnn = make(kind, in_size=2, hid=3)
    x = torch.randn(2, 4, 2, dtype=torch.float64, requires_grad=True)
    is_init = random_resets((2,), 4)
    hx = states_like(kind, rnn, (2,), torch.float64, 5)
    rs = states_like(kind, rnn, (2,), torch.float64, 6)
    extra = [t.requires_grad_() for t in _flat([hx, rs])]
    weights = [w.detach().requires_grad_() for layer in rnn_weights(rnn) for w in layer]

    def f(x, *args):
        ws = [args[4 * k : 4 * k + 4] for k in range(rnn.num_layers)]
        s = args[4 * rnn.num_layers :]
        if kind == "lstm":
            y, (h, c) = lstm_with_resets(x, is_init, ws, (s[0], s[1]), reset_state=(s[2], s[3]), backend="torch")  # fmt: skip
            return y, h, c
        y, h = gru_with_resets(x, is_init, ws, s[0], reset_state=s[1], backend="torch")
        return y, h

    assert torch.autograd.gradcheck(f, (x, *weights, *extra))


@pytest.mark.skipif(not HAS_TRITON, reason="no triton")
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_gradcheck_triton_float64(kind: str) -> None:
    # fast mode (a random projection of the Jacobian): the interpreted kernel is slow
    rnn = make(kind, in_size=2, hid=3, layers=1)
    x = torch.randn(2, 4, 2, dtype=torch.float64, requires_grad=True)
    is_init = random_resets((2,), 4)
    hx = states_like(kind, rnn, (2,), torch.float64, 5)
    rs = states_like(kind, rnn, (2,), torch.float64, 6)
    extra = [t.requires_grad_() for t in _flat([hx, rs])]
    weights = [w.detach().requires_grad_() for w in rnn_weights(rnn)[0]]

    def f(x, *args):
        s = args[4:]
        if kind == "lstm":
            y, (h, c) = lstm_with_resets(x, is_init, [args[:4]], (s[0], s[1]), reset_state=(s[2], s[3]), backend="triton")  # fmt: skip
            return y, h, c
        y, h = gru_with_resets(x, is_init, [args[:4]], s[0], reset_state=s[1], backend="triton")
        return y, h

    assert torch.autograd.gradcheck(f, (x, *weights, *extra), fast_mode=True)


@pytest.mark.skipif(not HAS_TRITON, reason="no triton")
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_triton_equals_torch_float32_several_programs_padded_hidden(kind: str) -> None:
    # 20 rows: two programs of 16 (the second masked); hidden 20 pads to 32
    rnn = make(kind, in_size=4, hid=20, layers=2, dtype=torch.float32)
    x = torch.randn(20, 6, 4)
    is_init = random_resets((20,), 6, seed=7)
    outs = {}
    for backend in ("torch", "triton"):
        rnn.zero_grad()
        xg = x.clone().requires_grad_()
        y, h, _ = run(kind, xg, is_init, rnn, backend=backend)
        (y.pow(2).sum() + h.sum()).backward()
        outs[backend] = [y, h, xg.grad, *(p.grad.clone() for p in rnn.parameters())]
    for a, b in zip(outs["torch"], outs["triton"], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_without_biases(kind: str) -> None:
    rnn = make(kind, bias=False)
    x = torch.randn(3, 4, 3, dtype=torch.float64)
    is_init = random_resets((3,), 4)
    y, h, _ = run(kind, x, is_init, rnn)
    y_ref, h_ref, _ = loop_reference(kind, rnn, x, is_init)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(h, h_ref)


def test_dropout_between_layers_only_in_training() -> None:
    rnn = nn.LSTM(3, 4, 2, batch_first=True, dropout=0.5)
    x, is_init = torch.randn(2, 5, 3), torch.zeros(2, 5, 1, dtype=torch.bool)
    ws = rnn_weights(rnn)
    y_eval, _ = lstm_with_resets(x, is_init, ws, dropout=0.5, training=False)
    torch.testing.assert_close(y_eval, rnn.eval()(x)[0])
    torch.manual_seed(0)
    a, _ = lstm_with_resets(x, is_init, ws, dropout=0.5, training=True)
    assert not torch.allclose(a, y_eval)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (lambda a: {**a, "is_init": a["is_init"].squeeze(-1)}, ValueError, r"is_init must have shape \[\*B, T, 1\]"),
        (lambda a: {**a, "is_init": a["is_init"].float()}, TypeError, "is_init must be a bool tensor"),
        (lambda a: {**a, "is_init": a["is_init"][:2]}, ValueError, "is_init must have shape"),
        (lambda a: {**a, "input": a["input"][..., :2]}, ValueError, "input_size=3"),
        (lambda a: {**a, "input": a["input"][:, :0], "is_init": a["is_init"][:, :0]}, ValueError, "T=0"),
        (lambda a: {**a, "input": a["input"].long()}, ValueError, "float tensor"),
        (lambda a: {**a, "hx": (torch.zeros(1, 4, 5), torch.zeros(1, 4, 5))}, ValueError, r"hx\[0\] must have shape"),
        (lambda a: {**a, "hx": (torch.zeros(1, 3, 5), torch.zeros(1, 3, 5, dtype=torch.float64))}, ValueError, r"hx\[1\] is torch.float64"),
        (lambda a: {**a, "backend": "cuda"}, ValueError, "backend must be"),
    ],
    ids=["mask-shape", "mask-dtype", "mask-batch", "input-size", "T=0", "input-dtype", "hx-shape", "hx-dtype", "backend-name"],
)  # fmt: skip
def test_bad_input_names_the_argument(change, error, match) -> None:
    rnn = nn.LSTM(3, 5, batch_first=True)
    args = {
        "input": torch.randn(3, 4, 3),
        "is_init": torch.zeros(3, 4, 1, dtype=torch.bool),
        "weights": rnn_weights(rnn),
    }
    with pytest.raises(error, match=match):
        lstm_with_resets(**change(args))


def test_gru_wrong_hidden_layout_is_an_error() -> None:
    lstm = nn.LSTM(3, 5, batch_first=True)
    with pytest.raises(ValueError, match=r"weight_hh_l0 must be \[3 \* hidden_size"):
        gru_with_resets(torch.randn(2, 4, 3), torch.zeros(2, 4, 1, dtype=torch.bool), rnn_weights(lstm))  # fmt: skip


def test_backend_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    assert _backend.resolve_backend("auto", cpu, 8, "f") == "torch"
    assert _backend.resolve_backend("torch", torch.device("cuda"), 8, "f") == "torch"
    if HAS_TRITON:
        assert _backend.resolve_backend("auto", torch.device("cuda"), 8, "f") == "triton"
        assert _backend.resolve_backend("auto", torch.device("cuda"), 4096, "f") == "torch"
        with pytest.raises(ValueError, match="hidden_size <= 128"):
            _backend.resolve_backend("triton", torch.device("cuda"), 4096, "f")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    if HAS_TRITON:
        with pytest.raises(RuntimeError, match=r"Triton kernels run on CUDA.*TRITON_INTERPRET=1"):
            _backend.resolve_backend("triton", cpu, 8, "lstm_with_resets")
    monkeypatch.setattr(_backend, "triton_available", lambda: False)
    assert _backend.resolve_backend("auto", torch.device("cuda"), 8, "f") == "torch"
    with pytest.raises(ImportError, match=r"rl-kernels\[triton\]"):
        _backend.resolve_backend("triton", torch.device("cuda"), 8, "f")


def test_runs_without_triton_installed() -> None:
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import torch, rl_kernels\n"
        "lstm = torch.nn.LSTM(3, 4, batch_first=True)\n"
        "y, _ = rl_kernels.lstm_with_resets(torch.randn(2, 5, 3), torch.ones(2, 5, 1, dtype=torch.bool), rl_kernels.rnn_weights(lstm))\n"
        "assert y.shape == (2, 5, 4) and 'triton' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "try:\n"
        "    rl_kernels.lstm_with_resets(torch.randn(2, 5, 3), torch.ones(2, 5, 1, dtype=torch.bool), rl_kernels.rnn_weights(lstm), backend='triton')\n"
        "except ImportError as e:\n"
        "    print('refused:', e)\n"
    )  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "refused:" in out.stdout and "rl-kernels[triton]" in out.stdout
