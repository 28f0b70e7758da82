"""Multi-layer LSTM / GRU over ``[*B, T, F]`` with per-step resets, as pure functions.

Gradients: each layer's recurrence is a :class:`torch.autograd.Function`
with a hand-written backward (torch loop or Triton kernel), not
recomputation. The forward saves the activated gates (``4H`` or ``3H``
values per step and row) and the state before each step; the backward then
walks time once in reverse. Recomputing instead would run the sequential
forward loop a second time inside the backward, and that loop (one small
matmul per step, latency bound) is the cost that matters at RL sizes,
while the saved activations are a few ``[T, B, H]`` tensors. Everything
that is not sequential is batched over time outside the loops: the input
projection ``x @ W_ih^T`` of all steps is one matmul (regular autograd),
and ``dW_hh`` is one ``[4H, T*B] x [T*B, H]`` matmul after the backward loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from rl_kernels.recurrent import _torch_core
from rl_kernels.recurrent._backend import resolve_backend

Tensor = torch.Tensor
LayerWeights = Sequence[Tensor | None]  # (w_ih, w_hh, b_ih, b_hh)


def _core(backend: str) -> Any:
    if backend == "triton":
        from rl_kernels.recurrent import _triton_core  # imports triton: only when asked for

        return _triton_core
    return _torch_core


class _LSTMLayer(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        xi: Tensor,
        reset: Tensor,
        h0: Tensor,
        c0: Tensor,
        hr: Tensor,
        cr: Tensor,
        w_hh: Tensor,
        backend: str,
    ) -> tuple[Tensor, Tensor]:
        y, cs, gates, h_prev, c_prev = _core(backend).lstm_forward(xi, reset, h0, c0, hr, cr, w_hh)
        ctx.save_for_backward(gates, cs, h_prev, c_prev, reset, w_hh)
        ctx.backend = backend
        ctx.set_materialize_grads(False)
        return y, cs

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dy: Tensor | None, dcs: Tensor | None) -> tuple[Tensor | None, ...]:
        gates, cs, h_prev, c_prev, reset, w_hh = ctx.saved_tensors
        dy = torch.zeros_like(cs) if dy is None else dy.contiguous()
        dcs = None if dcs is None else dcs.contiguous()
        dgates, dh0, dc0, dhr, dcr = _core(ctx.backend).lstm_backward(
            dy, dcs, gates, cs, c_prev, reset, w_hh
        )
        dw = None
        if ctx.needs_input_grad[6]:
            dw = dgates.reshape(-1, gates.shape[-1]).t() @ h_prev.reshape(-1, h_prev.shape[-1])
        return dgates, None, dh0, dc0, dhr, dcr, dw, None


class _GRULayer(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        xi: Tensor,
        reset: Tensor,
        h0: Tensor,
        hr: Tensor,
        w_hh: Tensor,
        b_hh: Tensor,
        backend: str,
    ) -> Tensor:
        y, gates, hh_n, h_prev = _core(backend).gru_forward(xi, reset, h0, hr, w_hh, b_hh)
        ctx.save_for_backward(gates, hh_n, h_prev, reset, w_hh)
        ctx.backend = backend
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, ...]:
        gates, hh_n, h_prev, reset, w_hh = ctx.saved_tensors
        dxi, dhh, dh0, dhr = _core(ctx.backend).gru_backward(
            dy.contiguous(), gates, hh_n, h_prev, reset, w_hh
        )
        flat = dhh.reshape(-1, dhh.shape[-1])
        dw = flat.t() @ h_prev.reshape(-1, h_prev.shape[-1]) if ctx.needs_input_grad[4] else None
        db = flat.sum(0) if ctx.needs_input_grad[5] else None
        return dxi, None, dh0, dhr, dw, db, None


def rnn_weights(rnn: nn.LSTM | nn.GRU) -> list[tuple[Tensor, Tensor, Tensor | None, Tensor | None]]:
    """Per-layer ``(weight_ih_lk, weight_hh_lk, bias_ih_lk, bias_hh_lk)`` of an ``nn.LSTM`` / ``nn.GRU``.

    Examples:
        >>> [w.shape for w in rnn_weights(nn.GRU(3, 4))[0]]
        [torch.Size([12, 3]), torch.Size([12, 4]), torch.Size([12]), torch.Size([12])]
    """
    return [
        (
            getattr(rnn, f"weight_ih_l{k}"),
            getattr(rnn, f"weight_hh_l{k}"),
            getattr(rnn, f"bias_ih_l{k}", None),
            getattr(rnn, f"bias_hh_l{k}", None),
        )
        for k in range(rnn.num_layers)
    ]


def _check(
    who: str,
    gates: int,
    input: Tensor,
    is_init: Tensor,
    weights: Sequence[LayerWeights],
    states: dict[str, Tensor | None],
) -> tuple[torch.Size, int, int, int]:
    if not isinstance(input, Tensor) or input.ndim < 2 or not input.is_floating_point():
        got = f"{tuple(input.shape)} {input.dtype}" if isinstance(input, Tensor) else type(input)
        raise ValueError(f"{who}: input must be a float tensor [*B, T, input_size], got {got}.")
    if len(weights) == 0:
        raise ValueError(f"{who}: weights must hold at least one layer.")
    w_ih, w_hh = weights[0][0], weights[0][1]
    hid = w_hh.shape[1]
    if w_hh.shape != (gates * hid, hid):
        raise ValueError(
            f"{who}: weight_hh_l0 must be [{gates} * hidden_size, hidden_size] (nn layout), "
            f"got {tuple(w_hh.shape)}."
        )
    if input.shape[-1] != w_ih.shape[1]:
        raise ValueError(
            f"{who}: input has {input.shape[-1]} features (last dim of {tuple(input.shape)}) but "
            f"the layer expects input_size={w_ih.shape[1]}."
        )
    batch, t_len = input.shape[:-2], input.shape[-2]
    if t_len == 0:
        raise ValueError(f"{who}: input has T=0 steps (shape {tuple(input.shape)}).")
    if not isinstance(is_init, Tensor) or is_init.dtype != torch.bool:
        got = is_init.dtype if isinstance(is_init, Tensor) else type(is_init)
        raise TypeError(
            f"{who}: is_init must be a bool tensor (True where a trajectory starts), got {got}; "
            "convert it with is_init.bool()."
        )
    want = (*input.shape[:-1], 1)
    if tuple(is_init.shape) != want:
        raise ValueError(
            f"{who}: is_init must have shape [*B, T, 1] = {want} to match input "
            f"{tuple(input.shape)}, got {tuple(is_init.shape)}."
        )
    if is_init.device != input.device:
        raise ValueError(f"{who}: is_init is on {is_init.device} but input on {input.device}.")
    layers = len(weights)
    for name, s in states.items():
        if s is None:
            continue
        if tuple(s.shape) != (layers, *batch, hid):
            raise ValueError(
                f"{who}: {name} must have shape [num_layers, *B, hidden_size] = "
                f"{(layers, *batch, hid)}, got {tuple(s.shape)}."
            )
        if s.dtype != input.dtype or s.device != input.device:
            raise ValueError(
                f"{who}: {name} is {s.dtype} on {s.device} but input is {input.dtype} on "
                f"{input.device}; they must match."
            )
    return batch, t_len, hid, layers


def _layer_states(s: Tensor | None, like: Tensor, layers: int, n: int, hid: int) -> list[Tensor]:
    if s is None:
        z = like.new_zeros(n, hid)
        return [z] * layers
    return list(s.reshape(layers, n, hid).unbind(0))


def lstm_with_resets(
    input: Tensor,
    is_init: Tensor,
    weights: Sequence[LayerWeights],
    hx: tuple[Tensor, Tensor] | None = None,
    *,
    reset_state: tuple[Tensor, Tensor] | None = None,
    dropout: float = 0.0,
    training: bool = False,
    backend: str = "auto",
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """A multi-layer LSTM over ``input [*B, T, F]`` whose state restarts where ``is_init``.

    Before step ``t`` the state of every layer is ``reset_state`` (zeros by
    default) where ``is_init[..., t, 0]`` is ``True``, else the state after
    step ``t - 1`` (``hx`` for ``t = 0``). Equal to a per-step
    ``nn.LSTMCell`` loop with those resets, and to ``nn.LSTM`` when nothing resets.

    Args:
        input: ``[*B, T, input_size]`` (time after the batch dims, as ``batch_first``).
        is_init: bool ``[*B, T, 1]``, ``True`` at the first step of a trajectory.
        weights: per layer ``(weight_ih, weight_hh, bias_ih, bias_hh)`` in ``nn.LSTM``'s layout
            (see :func:`rnn_weights`); biases may be ``None``.
        hx: ``(h, c)``, each ``[num_layers, *B, hidden]``: the state before step 0. Zeros if ``None``.
        reset_state: ``(h, c)`` like ``hx``: the state a trajectory starts from. Zeros if ``None``.
        dropout: dropout on the outputs of every layer but the last (as ``nn.LSTM``).
        training: apply ``dropout``.
        backend: ``"auto"`` (Triton for CUDA tensors when available, else torch),
            ``"triton"`` or ``"torch"``.

    Returns:
        ``(output [*B, T, hidden], (h, c))`` where ``h`` and ``c`` are the states
        of every layer after every step, ``[*B, T, num_layers, hidden]``.

    Examples:
        >>> lstm = nn.LSTM(3, 8, num_layers=2, batch_first=True)
        >>> x, is_init = torch.randn(4, 10, 3), torch.zeros(4, 10, 1, dtype=torch.bool)
        >>> is_init[:, 5] = True
        >>> y, (h, c) = lstm_with_resets(x, is_init, rnn_weights(lstm))
        >>> y.shape, h.shape
        (torch.Size([4, 10, 8]), torch.Size([4, 10, 2, 8]))
    """
    who = "lstm_with_resets"
    hx = (None, None) if hx is None else hx
    rs = (None, None) if reset_state is None else reset_state
    states = {"hx[0]": hx[0], "hx[1]": hx[1], "reset_state[0]": rs[0], "reset_state[1]": rs[1]}
    batch, t_len, hid, layers = _check(who, 4, input, is_init, weights, states)
    be = resolve_backend(backend, input.device, hid, who)
    n = batch.numel()
    h0, c0 = (_layer_states(s, input, layers, n, hid) for s in hx)
    hr, cr = (_layer_states(s, input, layers, n, hid) for s in rs)
    reset = is_init.reshape(n, t_len).t().contiguous()
    x = input.reshape(n, t_len, input.shape[-1]).transpose(0, 1)
    hs, cs = [], []
    for k, (w_ih, w_hh, b_ih, b_hh) in enumerate(weights):
        bias = b_ih if b_hh is None else (b_hh if b_ih is None else b_ih + b_hh)
        xi = F.linear(x, w_ih, bias).contiguous()
        y, c = _LSTMLayer.apply(xi, reset, h0[k], c0[k], hr[k], cr[k], w_hh, be)
        hs.append(y)
        cs.append(c)
        x = F.dropout(y, dropout, training=True) if dropout and training and k < layers - 1 else y
    out = x.transpose(0, 1).reshape(*batch, t_len, hid)

    def steps(s: list[Tensor]) -> Tensor:
        return torch.stack(s, 2).transpose(0, 1).reshape(*batch, t_len, layers, hid)

    return out, (steps(hs), steps(cs))


def gru_with_resets(
    input: Tensor,
    is_init: Tensor,
    weights: Sequence[LayerWeights],
    hx: Tensor | None = None,
    *,
    reset_state: Tensor | None = None,
    dropout: float = 0.0,
    training: bool = False,
    backend: str = "auto",
) -> tuple[Tensor, Tensor]:
    """A multi-layer GRU over ``input [*B, T, F]`` whose state restarts where ``is_init``.

    Same conventions as :func:`lstm_with_resets` with one state ``h``.

    Args:
        input: ``[*B, T, input_size]``.
        is_init: bool ``[*B, T, 1]``, ``True`` at the first step of a trajectory.
        weights: per layer ``(weight_ih, weight_hh, bias_ih, bias_hh)`` in ``nn.GRU``'s layout.
        hx: ``[num_layers, *B, hidden]``, the state before step 0. Zeros if ``None``.
        reset_state: like ``hx``: the state a trajectory starts from. Zeros if ``None``.
        dropout: dropout on the outputs of every layer but the last.
        training: apply ``dropout``.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Returns:
        ``(output [*B, T, hidden], h [*B, T, num_layers, hidden])``: every layer's state after every step.

    Examples:
        >>> gru = nn.GRU(3, 8, batch_first=True)
        >>> y, h = gru_with_resets(torch.randn(2, 5, 3), torch.ones(2, 5, 1, dtype=torch.bool), rnn_weights(gru))
        >>> y.shape, h.shape
        (torch.Size([2, 5, 8]), torch.Size([2, 5, 1, 8]))
    """
    who = "gru_with_resets"
    batch, t_len, hid, layers = _check(
        who, 3, input, is_init, weights, {"hx": hx, "reset_state": reset_state}
    )
    be = resolve_backend(backend, input.device, hid, who)
    n = batch.numel()
    h0 = _layer_states(hx, input, layers, n, hid)
    hr = _layer_states(reset_state, input, layers, n, hid)
    reset = is_init.reshape(n, t_len).t().contiguous()
    x = input.reshape(n, t_len, input.shape[-1]).transpose(0, 1)
    hs = []
    for k, (w_ih, w_hh, b_ih, b_hh) in enumerate(weights):
        xi = F.linear(x, w_ih, b_ih).contiguous()
        b = b_hh if b_hh is not None else w_hh.new_zeros(w_hh.shape[0])
        y = _GRULayer.apply(xi, reset, h0[k], hr[k], w_hh, b, be)
        hs.append(y)
        x = F.dropout(y, dropout, training=True) if dropout and training and k < layers - 1 else y
    out = x.transpose(0, 1).reshape(*batch, t_len, hid)
    h = torch.stack(hs, 2).transpose(0, 1).reshape(*batch, t_len, layers, hid)
    return out, h
