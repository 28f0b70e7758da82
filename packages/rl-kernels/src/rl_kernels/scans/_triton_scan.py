"""Triton kernels for the reverse scans (imported only when the Triton backend runs).

One program per batch row walks the row's ``T`` steps from the end in chunks of
``BLOCK`` steps. A chunk is loaded in reverse time order, so the recurrence
``y[t] = x[t] + g[t] * y[t + 1]`` becomes a forward linear recurrence along the
vector, solved by ``tl.associative_scan`` with the operator
``(a1, b1) o (a2, b2) = (a1 a2, b1 a2 + b2)``; the value at the chunk's first
step is carried into the next chunk. This is a blocked parallel scan: ``T / BLOCK``
sequential steps of a log-depth scan, instead of ``T`` dependent loads.

The estimators are fused: each kernel reads the rewards, values and flags once
and writes its outputs once. Inputs are ``[N, T]`` contiguous rows; flags are
passed as ``uint8``. Scalars (``gamma``, ...) come in a small tensor of the
accumulation dtype, so float64 runs keep float64 constants (Triton passes Python
floats as float32). Everything accumulates in float32, or float64 for float64 inputs.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rl_kernels.scans._inputs import acc_dtype

__all__ = ["triton_gae", "triton_linear_scan", "triton_td_lambda", "triton_vtrace"]

_MAX_BLOCK = 1024


@triton.jit
def _combine(a_left, b_left, a_right, b_right):
    return a_left * a_right, b_left * a_right + b_right


@triton.jit
def _acc(x, F64: tl.constexpr):
    if F64:
        return x.to(tl.float64)
    else:
        return x.to(tl.float32)


@triton.jit
def _zero(F64: tl.constexpr):
    if F64:
        return tl.zeros([1], dtype=tl.float64).sum(0)
    else:
        return tl.zeros([1], dtype=tl.float32).sum(0)


@triton.jit
def _steps(start, T, k, REVERSE: tl.constexpr):
    if REVERSE:
        return T - 1 - start - k
    else:
        return start + k


@triton.jit
def _chunk(a, b, mask, carry):
    """Solve one chunk given the carried value; masked lanes are the identity (a=1, b=0)."""
    a = tl.where(mask, a, 1.0)
    b = tl.where(mask, b, 0.0)
    a_cum, b_cum = tl.associative_scan((a, b), 0, _combine)
    return b_cum + a_cum * carry


@triton.jit
def _last(y, k, BLOCK: tl.constexpr):
    return tl.sum(tl.where(k == BLOCK - 1, y, 0.0), 0)


@triton.jit
def _linear_scan_kernel(
    x_ptr, g_ptr, y_ptr, T, REVERSE: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr
):
    base = tl.program_id(0).to(tl.int64) * T
    k = tl.arange(0, BLOCK)
    carry = _zero(F64)
    for start in range(0, T, BLOCK):
        t = _steps(start, T, k, REVERSE)
        mask = (t >= 0) & (t < T)
        x = _acc(tl.load(x_ptr + base + t, mask=mask, other=0.0), F64)
        g = _acc(tl.load(g_ptr + base + t, mask=mask, other=1.0), F64)
        y = _chunk(g, x, mask, carry)
        tl.store(y_ptr + base + t, y.to(y_ptr.dtype.element_ty), mask=mask)
        carry = _last(y, k, BLOCK)


@triton.jit
def _gae_kernel(
    v_ptr,
    nv_ptr,
    r_ptr,
    done_ptr,
    term_ptr,
    par_ptr,
    adv_ptr,
    target_ptr,
    T,
    F64: tl.constexpr,
    BLOCK: tl.constexpr,
):
    gamma = tl.load(par_ptr)
    gamma_lmbda = tl.load(par_ptr + 1)
    base = tl.program_id(0).to(tl.int64) * T
    k = tl.arange(0, BLOCK)
    carry = _zero(F64)
    for start in range(0, T, BLOCK):
        t = T - 1 - start - k
        mask = t >= 0
        v = _acc(tl.load(v_ptr + base + t, mask=mask, other=0.0), F64)
        nv = _acc(tl.load(nv_ptr + base + t, mask=mask, other=0.0), F64)
        r = _acc(tl.load(r_ptr + base + t, mask=mask, other=0.0), F64)
        done = tl.load(done_ptr + base + t, mask=mask, other=0) != 0
        term = tl.load(term_ptr + base + t, mask=mask, other=0) != 0
        delta = r + tl.where(term, 0.0, gamma * nv) - v
        adv = _chunk(tl.where(done, 0.0, gamma_lmbda), delta, mask, carry)
        tl.store(adv_ptr + base + t, adv.to(adv_ptr.dtype.element_ty), mask=mask)
        tl.store(target_ptr + base + t, (adv + v).to(target_ptr.dtype.element_ty), mask=mask)
        carry = _last(adv, k, BLOCK)


@triton.jit
def _td_lambda_kernel(
    nv_ptr,
    r_ptr,
    done_ptr,
    term_ptr,
    par_ptr,
    ret_ptr,
    T,
    F64: tl.constexpr,
    BLOCK: tl.constexpr,
):
    gamma = tl.load(par_ptr)
    lmbda = tl.load(par_ptr + 1)
    one_minus_lmbda = tl.load(par_ptr + 2)
    base = tl.program_id(0).to(tl.int64) * T
    k = tl.arange(0, BLOCK)
    carry = _zero(F64)
    for start in range(0, T, BLOCK):
        t = T - 1 - start - k
        mask = t >= 0
        nv = _acc(tl.load(nv_ptr + base + t, mask=mask, other=0.0), F64)
        r = _acc(tl.load(r_ptr + base + t, mask=mask, other=0.0), F64)
        done = tl.load(done_ptr + base + t, mask=mask, other=0) != 0
        term = tl.load(term_ptr + base + t, mask=mask, other=0) != 0
        # the recursion stops at episode ends and at the last step: G[t + 1] is V(s[t + 1])
        cut = done | (t == T - 1)
        boot = tl.where(term, 0.0, gamma)
        x = r + boot * nv * tl.where(cut, 1.0, one_minus_lmbda)
        ret = _chunk(tl.where(cut, 0.0, boot * lmbda), x, mask, carry)
        tl.store(ret_ptr + base + t, ret.to(ret_ptr.dtype.element_ty), mask=mask)
        carry = _last(ret, k, BLOCK)


@triton.jit
def _vtrace_kernel(
    log_pi_ptr,
    log_mu_ptr,
    v_ptr,
    nv_ptr,
    r_ptr,
    done_ptr,
    term_ptr,
    par_ptr,
    adv_ptr,
    vs_ptr,
    T,
    F64: tl.constexpr,
    BLOCK: tl.constexpr,
):
    gamma = tl.load(par_ptr)
    rho_thresh = tl.load(par_ptr + 1)
    c_thresh = tl.load(par_ptr + 2)
    base = tl.program_id(0).to(tl.int64) * T
    k = tl.arange(0, BLOCK)
    carry = _zero(F64)
    # pass 1: vs - V(s) = rho delta + gamma (1 - done) c (vs - V)[t + 1]
    for start in range(0, T, BLOCK):
        t = T - 1 - start - k
        mask = t >= 0
        log_pi = _acc(tl.load(log_pi_ptr + base + t, mask=mask, other=0.0), F64)
        log_mu = _acc(tl.load(log_mu_ptr + base + t, mask=mask, other=0.0), F64)
        v = _acc(tl.load(v_ptr + base + t, mask=mask, other=0.0), F64)
        nv = _acc(tl.load(nv_ptr + base + t, mask=mask, other=0.0), F64)
        r = _acc(tl.load(r_ptr + base + t, mask=mask, other=0.0), F64)
        done = tl.load(done_ptr + base + t, mask=mask, other=0) != 0
        term = tl.load(term_ptr + base + t, mask=mask, other=0) != 0
        ratio = tl.exp(log_pi - log_mu)
        rho = tl.minimum(ratio, rho_thresh)
        c = tl.minimum(ratio, c_thresh)
        delta = rho * (r + tl.where(term, 0.0, gamma * nv) - v)
        vs_minus_v = _chunk(tl.where(done, 0.0, gamma * c), delta, mask, carry)
        tl.store(vs_ptr + base + t, (vs_minus_v + v).to(vs_ptr.dtype.element_ty), mask=mask)
        carry = _last(vs_minus_v, k, BLOCK)
    # pass 2 reads vs[t + 1], written by this program in pass 1
    tl.debug_barrier()
    for start in range(0, T, BLOCK):
        t = start + k
        mask = t < T
        log_pi = _acc(tl.load(log_pi_ptr + base + t, mask=mask, other=0.0), F64)
        log_mu = _acc(tl.load(log_mu_ptr + base + t, mask=mask, other=0.0), F64)
        v = _acc(tl.load(v_ptr + base + t, mask=mask, other=0.0), F64)
        nv = _acc(tl.load(nv_ptr + base + t, mask=mask, other=0.0), F64)
        r = _acc(tl.load(r_ptr + base + t, mask=mask, other=0.0), F64)
        done = tl.load(done_ptr + base + t, mask=mask, other=0) != 0
        term = tl.load(term_ptr + base + t, mask=mask, other=0) != 0
        inside = mask & (t + 1 < T)
        vs_next = _acc(tl.load(vs_ptr + base + t + 1, mask=inside, other=0.0), F64)
        vs_next = tl.where(done | (t == T - 1), nv, vs_next)
        rho = tl.minimum(tl.exp(log_pi - log_mu), rho_thresh)
        adv = rho * (r + tl.where(term, 0.0, gamma * vs_next) - v)
        tl.store(adv_ptr + base + t, adv.to(adv_ptr.dtype.element_ty), mask=mask)


def _block(steps: int, block: int | None = None) -> int:
    """Steps per chunk: the whole row up to 1024, or ``block`` (``1`` is a plain reverse loop)."""
    if block is not None:
        if block < 1 or block & (block - 1):
            raise ValueError(f"block must be a power of two, got {block}.")
        return block
    return min(_MAX_BLOCK, max(16, triton.next_power_of_2(steps)))


def _params(like: torch.Tensor, *values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=acc_dtype(like.dtype), device=like.device)


def _flag(flag: torch.Tensor) -> torch.Tensor:
    return flag.view(torch.uint8)


def triton_linear_scan(x: torch.Tensor, g: torch.Tensor, *, reverse: bool = True) -> torch.Tensor:
    """``y[t] = x[t] + g[t] * y[t + 1]`` (``reverse``) or ``y[t - 1]`` along dim 1 of ``[N, T]``."""
    x, g = x.contiguous(), g.to(x.dtype).contiguous()
    y = torch.empty_like(x)
    rows, steps = x.shape
    _linear_scan_kernel[(rows,)](
        x, g, y, steps, REVERSE=reverse, F64=x.dtype == torch.float64, BLOCK=_block(steps)
    )
    return y


def triton_gae(
    value: torch.Tensor,
    next_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor,
    gamma: float,
    lmbda: float,
    block: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused GAE over ``[N, T]`` rows; returns ``(advantage, value_target)``.

    ``block`` overrides the chunk length (``1``: one step at a time, the reverse-loop
    formulation, kept to compare the two in ``benchmarks/bench_kernels_scans.py``).
    """
    advantage, target = torch.empty_like(reward), torch.empty_like(reward)
    rows, steps = reward.shape
    _gae_kernel[(rows,)](
        value,
        next_value,
        reward,
        _flag(done),
        _flag(terminated),
        _params(reward, gamma, gamma * lmbda),
        advantage,
        target,
        steps,
        F64=reward.dtype == torch.float64,
        BLOCK=_block(steps, block),
    )
    return advantage, target


def triton_td_lambda(
    next_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor,
    gamma: float,
    lmbda: float,
) -> torch.Tensor:
    """Fused TD(lambda) return over ``[N, T]`` rows."""
    ret = torch.empty_like(reward)
    rows, steps = reward.shape
    _td_lambda_kernel[(rows,)](
        next_value,
        reward,
        _flag(done),
        _flag(terminated),
        _params(reward, gamma, lmbda, 1.0 - lmbda),
        ret,
        steps,
        F64=reward.dtype == torch.float64,
        BLOCK=_block(steps),
    )
    return ret


def triton_vtrace(
    log_pi: torch.Tensor,
    log_mu: torch.Tensor,
    value: torch.Tensor,
    next_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor,
    gamma: float,
    rho_thresh: float,
    c_thresh: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused V-trace over ``[N, T]`` rows; returns ``(advantage, vs)``."""
    advantage, vs = torch.empty_like(reward), torch.empty_like(reward)
    rows, steps = reward.shape
    _vtrace_kernel[(rows,)](
        log_pi,
        log_mu,
        value,
        next_value,
        reward,
        _flag(done),
        _flag(terminated),
        _params(reward, gamma, rho_thresh, c_thresh),
        advantage,
        vs,
        steps,
        F64=reward.dtype == torch.float64,
        BLOCK=_block(steps),
    )
    return advantage, vs
