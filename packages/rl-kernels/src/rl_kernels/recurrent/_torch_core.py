"""Torch recurrences of one LSTM / GRU layer with resets, forward and hand-written backward.

Time-major layout throughout: ``xi [T, B, G*H]`` is the input projection
``x @ W_ih^T + b_ih (+ b_hh for the LSTM)`` computed for all steps in one
matmul before the loop, ``reset [T, B]`` (bool) says where the state before
step ``t`` is replaced by the reset state ``hr`` / ``cr``. The loops below do
only what is sequential: one ``[B, H] x [H, G*H]`` matmul and the gate
arithmetic per step; everything that does not depend on the recurrence is
done once on ``[T, B, H]`` tensors outside the loop.
"""

from __future__ import annotations

import torch

Tensor = torch.Tensor


def _reset_steps(reset: Tensor) -> list[bool]:
    return reset.any(1).tolist()  # one host sync for the whole sequence


def _tanh_(x: Tensor) -> Tensor:
    """In-place ``tanh(x) = 2 sigmoid(2x) - 1``: the same function to rounding, and ~10x
    faster than ``torch.tanh`` on CPU (whose kernel is not vectorised in some builds)."""
    return x.mul_(2).sigmoid_().mul_(2).sub_(1)


def _tanh(x: Tensor) -> Tensor:
    return _tanh_(x.clone())


def _masks(reset: Tensor, like: Tensor) -> tuple[Tensor, Tensor]:
    """Float ``(keep, take)`` masks ``[T, B, 1]``: a multiply is much cheaper than ``where``."""
    take = reset.unsqueeze(-1).to(like.dtype)
    return 1 - take, take


def _previous(y: Tensor, first: Tensor, reset: Tensor, value: Tensor) -> Tensor:
    """The state each step started from: the previous output, or ``value`` where it reset."""
    prev = torch.cat([first.unsqueeze(0), y[:-1]])
    return torch.where(reset.unsqueeze(-1), value, prev)


def lstm_forward(
    xi: Tensor, reset: Tensor, h0: Tensor, c0: Tensor, hr: Tensor, cr: Tensor, w_hh: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Returns ``(y, c, gates, h_prev, c_prev)``, each ``[T, B, *]``; gates are activated (i, f, g, o)."""
    t_len, _, g4 = xi.shape
    hid = g4 // 4
    gates = torch.empty_like(xi)
    y = xi.new_empty(t_len, *h0.shape)
    cs = torch.empty_like(y)
    w_t = w_hh.t()
    keep, take = _masks(reset, xi)
    resets = _reset_steps(reset)
    h, c = h0, c0
    for t in range(t_len):
        if resets[t]:
            h = torch.addcmul(h * keep[t], hr, take[t])
            c = torch.addcmul(c * keep[t], cr, take[t])
        g = torch.addmm(xi[t], h, w_t, out=gates[t])
        g[:, : 2 * hid].sigmoid_()
        _tanh_(g[:, 2 * hid : 3 * hid])
        g[:, 3 * hid :].sigmoid_()
        i, f, gg, o = g.split(hid, 1)
        c = torch.addcmul(i * gg, f, c, out=cs[t])
        h = torch.mul(o, _tanh(c), out=y[t])
    h_prev = _previous(y, h0, reset, hr)
    c_prev = _previous(cs, c0, reset, cr)
    return y, cs, gates, h_prev, c_prev


def lstm_backward(
    dy: Tensor,
    dcs: Tensor | None,
    gates: Tensor,
    cs: Tensor,
    c_prev: Tensor,
    reset: Tensor,
    w_hh: Tensor,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Returns ``(d_gates [T, B, 4H] (pre-activation), dh0, dc0, dhr, dcr)``."""
    t_len, b, g4 = gates.shape
    hid = g4 // 4
    i, f, gg, o = gates.split(hid, -1)
    dgates = torch.empty_like(gates)
    keep, take = _masks(reset, gates)
    resets = _reset_steps(reset)
    zeros = dy.new_zeros(b, hid)
    dhr, dcr = zeros, zeros
    dh = dy[t_len - 1]
    dc = zeros if dcs is None else dcs[t_len - 1]
    # Per step on [B, H] tiles that stay in cache: cheaper than the same products
    # precomputed on whole [T, B, H] tensors, which are memory bound.
    for t in range(t_len - 1, -1, -1):
        i_t, f_t, g_t, o_t = i[t], f[t], gg[t], o[t]
        tc = _tanh(cs[t])
        dh_o = dh * o_t
        dc = torch.addcmul(dc, dh_o, 1 - tc * tc)
        dg = dgates[t]
        torch.mul(dc * g_t, i_t * (1 - i_t), out=dg[:, :hid])
        torch.mul(dc * c_prev[t], f_t * (1 - f_t), out=dg[:, hid : 2 * hid])
        torch.mul(dc * i_t, 1 - g_t * g_t, out=dg[:, 2 * hid : 3 * hid])
        torch.mul(dh_o * tc, 1 - o_t, out=dg[:, 3 * hid :])
        nxt_dy = dy[t - 1] if t > 0 else zeros
        if resets[t]:
            # The reset state, not the previous step, fed this step: route the carry there.
            carry_h = dg @ w_hh
            carry_c = dc * f_t
            dhr = torch.addcmul(dhr, carry_h, take[t])
            dcr = torch.addcmul(dcr, carry_c, take[t])
            dh = torch.addcmul(nxt_dy, carry_h, keep[t])
            dc = carry_c * keep[t]
        else:
            dh = torch.addmm(nxt_dy, dg, w_hh)
            dc = dc * f_t
        if dcs is not None and t > 0:
            dc = dc + dcs[t - 1]
    return dgates, dh, dc, dhr, dcr


def gru_forward(
    xi: Tensor, reset: Tensor, h0: Tensor, hr: Tensor, w_hh: Tensor, b_hh: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Returns ``(y, gates (r, z, n activated), hh_n (W_hn h + b_hn), h_prev)``, each ``[T, B, *]``."""
    t_len, _, g3 = xi.shape
    hid = g3 // 3
    y = xi.new_empty(t_len, *h0.shape)
    gates = torch.empty_like(xi)
    hh_n = torch.empty_like(y)
    w_t = w_hh.t()
    keep, take = _masks(reset, xi)
    resets = _reset_steps(reset)
    h = h0
    for t in range(t_len):
        if resets[t]:
            h = torch.addcmul(h * keep[t], hr, take[t])
        hh = torch.addmm(b_hh, h, w_t)
        g = gates[t]
        rz = torch.add(xi[t, :, : 2 * hid], hh[:, : 2 * hid], out=g[:, : 2 * hid]).sigmoid_()
        hh_n[t] = hh[:, 2 * hid :]
        n = torch.addcmul(xi[t, :, 2 * hid :], rz[:, :hid], hh[:, 2 * hid :], out=g[:, 2 * hid :])
        _tanh_(n)
        h = torch.addcmul(n, rz[:, hid:], h - n, out=y[t])
    h_prev = _previous(y, h0, reset, hr)
    return y, gates, hh_n, h_prev


def gru_backward(
    dy: Tensor, gates: Tensor, hh_n: Tensor, h_prev: Tensor, reset: Tensor, w_hh: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Returns ``(d_xi [T, B, 3H], d_hh [T, B, 3H] (pre-bias hidden projection), dh0, dhr)``."""
    t_len, b, g3 = gates.shape
    hid = g3 // 3
    r, z, n = gates.split(hid, -1)
    k_n = (1 - z) * (1 - n * n)  # d(n pre-act) = dh * k_n
    k_z = (h_prev - n) * z * (1 - z)  # d(z pre-act) = dh * k_z
    k_r = hh_n * r * (1 - r)  # d(r pre-act) = dn * k_r
    dxi = torch.empty_like(gates)
    dhh = torch.empty_like(gates)
    keep, take = _masks(reset, gates)
    resets = _reset_steps(reset)
    zeros = dy.new_zeros(b, hid)
    dhr = zeros
    dh = dy[t_len - 1]
    for t in range(t_len - 1, -1, -1):
        dn = torch.mul(dh, k_n[t], out=dxi[t, :, 2 * hid :])
        torch.mul(dh, k_z[t], out=dxi[t, :, hid : 2 * hid])
        torch.mul(dn, k_r[t], out=dxi[t, :, :hid])
        dhh[t, :, : 2 * hid] = dxi[t, :, : 2 * hid]
        torch.mul(dn, r[t], out=dhh[t, :, 2 * hid :])
        nxt_dy = dy[t - 1] if t > 0 else zeros
        if resets[t]:
            carry = torch.addmm(dh * z[t], dhh[t], w_hh)
            dhr = torch.addcmul(dhr, carry, take[t])
            dh = torch.addcmul(nxt_dy, carry, keep[t])
        else:
            dh = torch.addmm(torch.addcmul(nxt_dy, dh, z[t]), dhh[t], w_hh)
    return dxi, dhh, dh, dhr
