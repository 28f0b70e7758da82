"""Triton recurrences of one LSTM / GRU layer with resets: the same contract as ``_torch_core``.

One program owns ``BLOCK_B`` batch rows and the whole (padded) hidden
vector, and walks all ``T`` steps in one launch: the state stays in
registers, the per-step recurrent matmul is ``tl.dot`` against ``[H, H]``
tiles of ``W_hh`` (one per gate, re-read from L2 each step), and the reset
is a ``tl.where`` on the state. The backward kernel walks time in reverse
the same way and writes the pre-activation gate gradients; ``dW_hh`` is one
big matmul outside. Rows are independent, so no atomics are needed.
Importing this module imports triton: :mod:`.functional` does it lazily.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

Tensor = torch.Tensor
_BLOCK_B = 16  # tl.dot needs at least 16 rows


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _tanh(x):
    return 2.0 * _sigmoid(2.0 * x) - 1.0


@triton.jit
def _lstm_fwd_kernel(
    xi_ptr, reset_ptr, h0_ptr, c0_ptr, hr_ptr, cr_ptr, w_ptr,
    y_ptr, c_ptr, g_ptr, hp_ptr, cp_ptr,
    T, B, H,
    BLOCK_B: tl.constexpr, HP: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.arange(0, HP)
    rmask = rows < B
    m2 = rmask[:, None] & (cols[None, :] < H)
    bh = rows[:, None] * H + cols[None, :]
    bg = rows[:, None] * (4 * H) + cols[None, :]
    # W^T tile of one gate: element [k, j] is W[q * H + j, k].
    wt = cols[None, :] * H + cols[:, None]
    wmask = (cols[:, None] < H) & (cols[None, :] < H)
    h = tl.load(h0_ptr + bh, mask=m2, other=0.0)
    c = tl.load(c0_ptr + bh, mask=m2, other=0.0)
    hr = tl.load(hr_ptr + bh, mask=m2, other=0.0)
    cr = tl.load(cr_ptr + bh, mask=m2, other=0.0)
    for t in range(T):
        rs = tl.load(reset_ptr + t * B + rows, mask=rmask, other=0) != 0
        h = tl.where(rs[:, None], hr, h)
        c = tl.where(rs[:, None], cr, c)
        tl.store(hp_ptr + t * B * H + bh, h, mask=m2)
        tl.store(cp_ptr + t * B * H + bh, c, mask=m2)
        xg = xi_ptr + t * B * 4 * H + bg
        w_i = tl.load(w_ptr + wt, mask=wmask, other=0.0)
        w_f = tl.load(w_ptr + H * H + wt, mask=wmask, other=0.0)
        w_g = tl.load(w_ptr + 2 * H * H + wt, mask=wmask, other=0.0)
        w_o = tl.load(w_ptr + 3 * H * H + wt, mask=wmask, other=0.0)
        i = _sigmoid(tl.load(xg, mask=m2, other=0.0) + tl.dot(h, w_i, input_precision="ieee"))
        f = _sigmoid(tl.load(xg + H, mask=m2, other=0.0) + tl.dot(h, w_f, input_precision="ieee"))
        g = _tanh(tl.load(xg + 2 * H, mask=m2, other=0.0) + tl.dot(h, w_g, input_precision="ieee"))
        o = _sigmoid(
            tl.load(xg + 3 * H, mask=m2, other=0.0) + tl.dot(h, w_o, input_precision="ieee")
        )
        c = f * c + i * g
        h = o * _tanh(c)
        tl.store(y_ptr + t * B * H + bh, h, mask=m2)
        tl.store(c_ptr + t * B * H + bh, c, mask=m2)
        gt = g_ptr + t * B * 4 * H + bg
        tl.store(gt, i, mask=m2)
        tl.store(gt + H, f, mask=m2)
        tl.store(gt + 2 * H, g, mask=m2)
        tl.store(gt + 3 * H, o, mask=m2)


@triton.jit
def _lstm_bwd_kernel(
    dy_ptr, dcs_ptr, g_ptr, c_ptr, cp_ptr, reset_ptr, w_ptr,
    dg_ptr, dh0_ptr, dc0_ptr, dhr_ptr, dcr_ptr,
    T, B, H,
    HAS_DC: tl.constexpr, BLOCK_B: tl.constexpr, HP: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.arange(0, HP)
    rmask = rows < B
    m2 = rmask[:, None] & (cols[None, :] < H)
    bh = rows[:, None] * H + cols[None, :]
    bg = rows[:, None] * (4 * H) + cols[None, :]
    # W tile of one gate: element [j, k] is W[q * H + j, k].
    wn = cols[:, None] * H + cols[None, :]
    wmask = (cols[:, None] < H) & (cols[None, :] < H)
    zero = tl.zeros([BLOCK_B, HP], dtype=dy_ptr.dtype.element_ty)
    dh = zero
    dc = zero
    dhr = zero
    dcr = zero
    for tt in range(T):
        t = T - 1 - tt
        dh += tl.load(dy_ptr + t * B * H + bh, mask=m2, other=0.0)
        if HAS_DC:
            dc += tl.load(dcs_ptr + t * B * H + bh, mask=m2, other=0.0)
        gt = g_ptr + t * B * 4 * H + bg
        i = tl.load(gt, mask=m2, other=0.0)
        f = tl.load(gt + H, mask=m2, other=0.0)
        g = tl.load(gt + 2 * H, mask=m2, other=0.0)
        o = tl.load(gt + 3 * H, mask=m2, other=0.0)
        tc = _tanh(tl.load(c_ptr + t * B * H + bh, mask=m2, other=0.0))
        dc += dh * o * (1.0 - tc * tc)
        d_i = dc * g * i * (1.0 - i)
        d_f = dc * tl.load(cp_ptr + t * B * H + bh, mask=m2, other=0.0) * f * (1.0 - f)
        d_g = dc * i * (1.0 - g * g)
        d_o = dh * tc * o * (1.0 - o)
        dgt = dg_ptr + t * B * 4 * H + bg
        tl.store(dgt, d_i, mask=m2)
        tl.store(dgt + H, d_f, mask=m2)
        tl.store(dgt + 2 * H, d_g, mask=m2)
        tl.store(dgt + 3 * H, d_o, mask=m2)
        dhp = tl.dot(d_i, tl.load(w_ptr + wn, mask=wmask, other=0.0), input_precision="ieee")
        dhp += tl.dot(
            d_f, tl.load(w_ptr + H * H + wn, mask=wmask, other=0.0), input_precision="ieee"
        )
        dhp += tl.dot(
            d_g, tl.load(w_ptr + 2 * H * H + wn, mask=wmask, other=0.0), input_precision="ieee"
        )
        dhp += tl.dot(
            d_o, tl.load(w_ptr + 3 * H * H + wn, mask=wmask, other=0.0), input_precision="ieee"
        )
        dcp = dc * f
        rs = (tl.load(reset_ptr + t * B + rows, mask=rmask, other=0) != 0)[:, None]
        dhr += tl.where(rs, dhp, 0.0)
        dcr += tl.where(rs, dcp, 0.0)
        dh = tl.where(rs, 0.0, dhp)
        dc = tl.where(rs, 0.0, dcp)
    tl.store(dh0_ptr + bh, dh, mask=m2)
    tl.store(dc0_ptr + bh, dc, mask=m2)
    tl.store(dhr_ptr + bh, dhr, mask=m2)
    tl.store(dcr_ptr + bh, dcr, mask=m2)


@triton.jit
def _gru_fwd_kernel(
    xi_ptr, reset_ptr, h0_ptr, hr_ptr, w_ptr, b_ptr,
    y_ptr, g_ptr, hhn_ptr, hp_ptr,
    T, B, H,
    BLOCK_B: tl.constexpr, HP: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.arange(0, HP)
    rmask = rows < B
    cmask = cols < H
    m2 = rmask[:, None] & cmask[None, :]
    bh = rows[:, None] * H + cols[None, :]
    bg = rows[:, None] * (3 * H) + cols[None, :]
    wt = cols[None, :] * H + cols[:, None]
    wmask = (cols[:, None] < H) & cmask[None, :]
    b_r = tl.load(b_ptr + cols, mask=cmask, other=0.0)[None, :]
    b_z = tl.load(b_ptr + H + cols, mask=cmask, other=0.0)[None, :]
    b_n = tl.load(b_ptr + 2 * H + cols, mask=cmask, other=0.0)[None, :]
    h = tl.load(h0_ptr + bh, mask=m2, other=0.0)
    hr = tl.load(hr_ptr + bh, mask=m2, other=0.0)
    for t in range(T):
        rs = tl.load(reset_ptr + t * B + rows, mask=rmask, other=0) != 0
        h = tl.where(rs[:, None], hr, h)
        tl.store(hp_ptr + t * B * H + bh, h, mask=m2)
        xg = xi_ptr + t * B * 3 * H + bg
        w_r = tl.load(w_ptr + wt, mask=wmask, other=0.0)
        w_z = tl.load(w_ptr + H * H + wt, mask=wmask, other=0.0)
        w_n = tl.load(w_ptr + 2 * H * H + wt, mask=wmask, other=0.0)
        r = _sigmoid(tl.load(xg, mask=m2, other=0.0) + tl.dot(h, w_r, input_precision="ieee") + b_r)
        z = _sigmoid(
            tl.load(xg + H, mask=m2, other=0.0) + tl.dot(h, w_z, input_precision="ieee") + b_z
        )
        hn = tl.dot(h, w_n, input_precision="ieee") + b_n
        n = _tanh(tl.load(xg + 2 * H, mask=m2, other=0.0) + r * hn)
        h = n + z * (h - n)
        tl.store(y_ptr + t * B * H + bh, h, mask=m2)
        tl.store(hhn_ptr + t * B * H + bh, hn, mask=m2)
        gt = g_ptr + t * B * 3 * H + bg
        tl.store(gt, r, mask=m2)
        tl.store(gt + H, z, mask=m2)
        tl.store(gt + 2 * H, n, mask=m2)


@triton.jit
def _gru_bwd_kernel(
    dy_ptr, g_ptr, hhn_ptr, hp_ptr, reset_ptr, w_ptr,
    dxi_ptr, dh0_ptr, dhr_ptr,
    T, B, H,
    BLOCK_B: tl.constexpr, HP: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.arange(0, HP)
    rmask = rows < B
    m2 = rmask[:, None] & (cols[None, :] < H)
    bh = rows[:, None] * H + cols[None, :]
    bg = rows[:, None] * (3 * H) + cols[None, :]
    wn = cols[:, None] * H + cols[None, :]
    wmask = (cols[:, None] < H) & (cols[None, :] < H)
    zero = tl.zeros([BLOCK_B, HP], dtype=dy_ptr.dtype.element_ty)
    dh = zero
    dhr = zero
    for tt in range(T):
        t = T - 1 - tt
        dh += tl.load(dy_ptr + t * B * H + bh, mask=m2, other=0.0)
        gt = g_ptr + t * B * 3 * H + bg
        r = tl.load(gt, mask=m2, other=0.0)
        z = tl.load(gt + H, mask=m2, other=0.0)
        n = tl.load(gt + 2 * H, mask=m2, other=0.0)
        hn = tl.load(hhn_ptr + t * B * H + bh, mask=m2, other=0.0)
        hprev = tl.load(hp_ptr + t * B * H + bh, mask=m2, other=0.0)
        d_n = dh * (1.0 - z) * (1.0 - n * n)
        d_z = dh * (hprev - n) * z * (1.0 - z)
        d_r = d_n * hn * r * (1.0 - r)
        dgt = dxi_ptr + t * B * 3 * H + bg
        tl.store(dgt, d_r, mask=m2)
        tl.store(dgt + H, d_z, mask=m2)
        tl.store(dgt + 2 * H, d_n, mask=m2)
        dhp = dh * z
        dhp += tl.dot(d_r, tl.load(w_ptr + wn, mask=wmask, other=0.0), input_precision="ieee")
        dhp += tl.dot(
            d_z, tl.load(w_ptr + H * H + wn, mask=wmask, other=0.0), input_precision="ieee"
        )
        dhp += tl.dot(
            d_n * r,
            tl.load(w_ptr + 2 * H * H + wn, mask=wmask, other=0.0),
            input_precision="ieee",
        )
        rs = (tl.load(reset_ptr + t * B + rows, mask=rmask, other=0) != 0)[:, None]
        dhr += tl.where(rs, dhp, 0.0)
        dh = tl.where(rs, 0.0, dhp)
    tl.store(dh0_ptr + bh, dh, mask=m2)
    tl.store(dhr_ptr + bh, dhr, mask=m2)


def _launch_args(xi: Tensor, gates: int) -> tuple[int, int, int, tuple[int], int]:
    t_len, b, g = xi.shape
    hid = g // gates
    hp = max(16, triton.next_power_of_2(hid))
    return t_len, b, hid, (triton.cdiv(b, _BLOCK_B),), hp


def _c(x: Tensor) -> Tensor:
    return x.contiguous()


def lstm_forward(
    xi: Tensor, reset: Tensor, h0: Tensor, c0: Tensor, hr: Tensor, cr: Tensor, w_hh: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Same contract as :func:`rl_kernels.recurrent._torch_core.lstm_forward`."""
    t_len, b, hid, grid, hp = _launch_args(xi, 4)
    y = xi.new_empty(t_len, b, hid)
    cs, h_prev, c_prev = torch.empty_like(y), torch.empty_like(y), torch.empty_like(y)
    gates = torch.empty_like(xi)
    _lstm_fwd_kernel[grid](
        _c(xi), reset.to(torch.uint8), _c(h0), _c(c0), _c(hr), _c(cr), _c(w_hh),
        y, cs, gates, h_prev, c_prev, t_len, b, hid, BLOCK_B=_BLOCK_B, HP=hp,
    )  # fmt: skip
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
    """Same contract as :func:`rl_kernels.recurrent._torch_core.lstm_backward`."""
    t_len, b, hid, grid, hp = _launch_args(gates, 4)
    dgates = torch.empty_like(gates)
    dh0, dc0, dhr, dcr = (dy.new_empty(b, hid) for _ in range(4))
    _lstm_bwd_kernel[grid](
        _c(dy), dy if dcs is None else _c(dcs), gates, cs, c_prev, reset.to(torch.uint8),
        _c(w_hh), dgates, dh0, dc0, dhr, dcr, t_len, b, hid,
        HAS_DC=dcs is not None, BLOCK_B=_BLOCK_B, HP=hp,
    )  # fmt: skip
    return dgates, dh0, dc0, dhr, dcr


def gru_forward(
    xi: Tensor, reset: Tensor, h0: Tensor, hr: Tensor, w_hh: Tensor, b_hh: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Same contract as :func:`rl_kernels.recurrent._torch_core.gru_forward`."""
    t_len, b, hid, grid, hp = _launch_args(xi, 3)
    y = xi.new_empty(t_len, b, hid)
    hh_n, h_prev = torch.empty_like(y), torch.empty_like(y)
    gates = torch.empty_like(xi)
    _gru_fwd_kernel[grid](
        _c(xi), reset.to(torch.uint8), _c(h0), _c(hr), _c(w_hh), _c(b_hh),
        y, gates, hh_n, h_prev, t_len, b, hid, BLOCK_B=_BLOCK_B, HP=hp,
    )  # fmt: skip
    return y, gates, hh_n, h_prev


def gru_backward(
    dy: Tensor, gates: Tensor, hh_n: Tensor, h_prev: Tensor, reset: Tensor, w_hh: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Same contract as :func:`rl_kernels.recurrent._torch_core.gru_backward`."""
    t_len, b, hid, grid, hp = _launch_args(gates, 3)
    dxi = torch.empty_like(gates)
    dh0, dhr = dy.new_empty(b, hid), dy.new_empty(b, hid)
    _gru_bwd_kernel[grid](
        _c(dy), gates, hh_n, h_prev, reset.to(torch.uint8), _c(w_hh),
        dxi, dh0, dhr, t_len, b, hid, BLOCK_B=_BLOCK_B, HP=hp,
    )  # fmt: skip
    dhh = dxi.clone()
    dhh[..., 2 * hid :] *= gates[..., :hid]
    return dxi, dhh, dh0, dhr
