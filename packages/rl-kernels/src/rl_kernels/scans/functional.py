"""Reverse scans with done masks: discounted sums, GAE, TD(lambda) and V-trace.

Every function takes tensors shaped ``[*B, T, *F]`` (``T`` at ``time_dim``, ``-2``
by default, so the usual layout is ``[*B, T, 1]``; ``B`` may be empty) and
returns tensors of that shape and of the inputs' dtype. ``float32`` and
``float64`` accumulate in their own precision; ``bfloat16`` and ``float16``
inputs accumulate in ``float32``. Non-contiguous inputs are accepted.

Episode ends follow ``docs/contract.md``: ``done = terminated | truncated``. A
``terminated`` step does not bootstrap (the next state is worth zero), a
``truncated`` one bootstraps from ``next_state_value``, and no recursion crosses
a ``done`` step. ``terminated`` defaults to ``done``. The names, argument orders
and results are those of ``torchrl.objectives.value.functional``; V-trace's
advantage additionally bootstraps from ``next_state_value`` after a truncation,
where TorchRL reads the first value of the following episode.

``backend`` picks the implementation: ``"triton"`` (fused Triton kernels, CUDA
tensors or ``TRITON_INTERPRET=1``), ``"torch"`` (vectorised torch, any device)
or ``"auto"`` (Triton on CUDA tensors when it imports, else torch). Both
backends are differentiable with respect to the float inputs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import torch

from rl_kernels._backend import resolve_backend, run_with_fallback
from rl_kernels.scans._autograd import linear_scan_rows
from rl_kernels.scans._inputs import Scalar, acc_dtype, check_inputs, is_scalar, scalar_value
from rl_kernels.scans._torch_scan import reverse_scan_time_major

__all__ = [
    "discounted_cumsum",
    "generalized_advantage_estimate",
    "reward2go",
    "td_lambda_advantage_estimate",
    "td_lambda_return_estimate",
    "vtrace_advantage_estimate",
]

_FLAGS = ("done", "terminated")
_Out = TypeVar("_Out")


# -- layouts ---------------------------------------------------------------------------


def _rows(x: torch.Tensor, time_dim: int) -> torch.Tensor:
    """``[*B, T, *F]`` -> ``[N, T]`` (a view whenever the strides allow it)."""
    return x.movedim(time_dim, -1).reshape(-1, x.shape[time_dim])


def _from_rows(y: torch.Tensor, shape: torch.Size, time_dim: int) -> torch.Tensor:
    """``[N, T]`` -> ``[*B, T, *F]``, contiguous (a no-op copy for ``[*B, T, 1]``)."""
    moved = [s for i, s in enumerate(shape) if i != time_dim] + [shape[time_dim]]
    return y.reshape(moved).movedim(-1, time_dim).contiguous()


# -- shared plumbing ---------------------------------------------------------------------


def _common_dtype(*tensors: torch.Tensor) -> torch.dtype:
    return functools.reduce(torch.promote_types, (t.dtype for t in tensors))


def _needs_grad(*values: object) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(v, torch.Tensor) and v.requires_grad for v in values
    )


def _not(flag: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (~flag).to(dtype)


def _last_step(shape: torch.Size, time_dim: int, device: torch.device) -> torch.Tensor:
    """A bool mask, ``True`` on the last step, broadcastable to ``shape``."""
    steps = shape[time_dim]
    view = [1] * len(shape)
    view[time_dim] = steps
    return (torch.arange(steps, device=device) == steps - 1).view(view)


def _scan(x: torch.Tensor, g: torch.Tensor, time_dim: int, backend: str) -> torch.Tensor:
    """Differentiable ``y[t] = x[t] + g[t] * y[t + 1]`` along ``time_dim`` (contiguous result)."""
    g = g.expand_as(x)
    y = linear_scan_rows(_rows(x, time_dim), _rows(g, time_dim), backend)
    return _from_rows(y, x.shape, time_dim)


def _dispatch(
    backend: str,
    device: torch.device,
    fused_ok: bool,
    triton_fused: Callable[[], _Out] | None,
    torch_fused: Callable[[], _Out] | None,
    general: Callable[[str], _Out],
) -> _Out:
    """Run the fused path of the chosen backend, or the general (differentiable) one.

    The fused paths take scalar ``gamma`` / ``lmbda`` and no gradient; the general one
    builds the scan's inputs with autograd-tracked torch ops and runs the chosen
    backend's scan inside an ``autograd.Function``.
    """
    chosen = resolve_backend(backend, device)
    if fused_ok:
        return run_with_fallback(backend, chosen, triton_fused, torch_fused)
    return run_with_fallback(backend, chosen, lambda: general("triton"), lambda: general("torch"))


# -- discounted sums -------------------------------------------------------------------


def discounted_cumsum(
    x: torch.Tensor,
    discount: Scalar,
    *,
    done: torch.Tensor | None = None,
    time_dim: int = -2,
    backend: str = "auto",
) -> torch.Tensor:
    """Reverse discounted cumulative sum ``y[t] = x[t] + discount[t] * (1 - done[t]) * y[t + 1]``.

    Args:
        x: ``[*B, T, *F]`` values.
        discount: a float or a tensor broadcastable to ``x`` (per-step discounts).
        done: optional bool mask of ``x``'s shape; the sum restarts after each ``True``.
        time_dim: the time dimension.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Returns:
        ``y`` with the shape and dtype of ``x``.

    Examples:
        >>> discounted_cumsum(torch.ones(3, 1), 0.5).squeeze(-1)
        tensor([1.7500, 1.5000, 1.0000])
    """
    time_dim = check_inputs(time_dim, _FLAGS, x=x, done=done)
    acc = acc_dtype(x.dtype)
    if isinstance(discount, torch.Tensor):
        discount = discount.to(device=x.device, dtype=acc)
    else:
        discount = torch.tensor(float(discount), dtype=acc, device=x.device)
    try:
        g = discount.expand_as(x)
    except RuntimeError as err:
        raise ValueError(
            f"discount of shape {tuple(discount.shape)} does not broadcast to x's shape "
            f"{tuple(x.shape)}; pass a float or a tensor broadcastable to x."
        ) from err
    if done is not None:
        g = g * _not(done, acc)

    def run(backend_name: str) -> torch.Tensor:
        return _scan(x.to(acc), g, time_dim, backend_name).to(x.dtype).contiguous()

    return _dispatch(backend, x.device, False, None, None, run)


def reward2go(
    reward: torch.Tensor,
    done: torch.Tensor,
    gamma: Scalar = 0.99,
    *,
    time_dim: int = -2,
    backend: str = "auto",
) -> torch.Tensor:
    """Discounted reward-to-go inside each episode (no bootstrap), as TorchRL's ``reward2go``.

    Args:
        reward: ``[*B, T, *F]`` rewards.
        done: bool, same shape; the sum restarts after each ``True``.
        gamma: discount factor.
        time_dim: the time dimension.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Examples:
        >>> r = torch.ones(4, 1)
        >>> d = torch.tensor([[False], [True], [False], [False]])
        >>> reward2go(r, d, gamma=1.0).squeeze(-1)
        tensor([2., 1., 2., 1.])
    """
    check_inputs(time_dim, _FLAGS, reward=reward, done=done)
    return discounted_cumsum(reward, gamma, done=done, time_dim=time_dim, backend=backend)


# -- GAE -----------------------------------------------------------------------------------


def generalized_advantage_estimate(
    gamma: Scalar,
    lmbda: Scalar,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    time_dim: int = -2,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation (Schulman et al. 2016, arXiv:1506.02438).

    ``delta[t] = r[t] + gamma (1 - terminated[t]) V(s[t+1]) - V(s[t])`` and
    ``A[t] = delta[t] + gamma lmbda (1 - done[t]) A[t+1]``.

    Args:
        gamma: discount factor (float, or tensor broadcastable to the inputs).
        lmbda: GAE lambda (same).
        state_value: ``V(s[t])``, ``[*B, T, *F]``.
        next_state_value: ``V(s[t+1])``, same shape.
        reward: same shape.
        done: bool, same shape.
        terminated: bool, same shape (``done`` when ``None``).
        time_dim: the time dimension.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Returns:
        ``(advantage, value_target)`` with ``value_target = advantage + state_value``.

    Raises:
        ValueError: mismatched shapes, ``T == 0``, an unknown backend.
        TypeError: non-bool ``done`` / ``terminated``, non-float values.

    Examples:
        >>> v = torch.zeros(3, 1)
        >>> d = torch.zeros(3, 1, dtype=torch.bool)
        >>> adv, target = generalized_advantage_estimate(1.0, 1.0, v, v, torch.ones(3, 1), d)
        >>> adv.squeeze(-1)
        tensor([3., 2., 1.])
    """
    if terminated is None:
        terminated = done
    time_dim = check_inputs(
        time_dim,
        _FLAGS,
        state_value=state_value,
        next_state_value=next_state_value,
        reward=reward,
        done=done,
        terminated=terminated,
    )
    dtype = _common_dtype(state_value, next_state_value, reward)
    acc = acc_dtype(dtype)
    shape = reward.shape
    fused_ok = (
        is_scalar(gamma)
        and is_scalar(lmbda)
        and not _needs_grad(state_value, next_state_value, reward, gamma, lmbda)
    )

    def triton_fused() -> tuple[torch.Tensor, torch.Tensor]:
        from rl_kernels.scans._triton_scan import triton_gae

        rows = [
            _rows(t.to(dtype), time_dim).contiguous()
            for t in (state_value, next_state_value, reward)
        ]
        flags = [_rows(t, time_dim).contiguous() for t in (done, terminated)]
        adv, target = triton_gae(*rows, *flags, scalar_value(gamma), scalar_value(lmbda))
        return _from_rows(adv, shape, time_dim), _from_rows(target, shape, time_dim)

    def torch_fused() -> tuple[torch.Tensor, torch.Tensor]:
        g, lm = scalar_value(gamma), scalar_value(lmbda)
        value, next_value, rew = (
            _rows(t, time_dim).to(acc) for t in (state_value, next_state_value, reward)
        )
        # elementwise work on contiguous rows, then one fast 2-D transpose to time-major
        delta = torch.mul(next_value, g).masked_fill_(_rows(terminated, time_dim), 0.0)
        delta.add_(rew).sub_(value)
        discount = torch.full(delta.shape[::-1], g * lm, dtype=acc, device=delta.device)
        discount.masked_fill_(_rows(done, time_dim).t(), 0.0)
        adv = reverse_scan_time_major(delta.t().contiguous(), discount).t().contiguous()
        target = adv + value
        return _from_rows(adv.to(dtype), shape, time_dim), _from_rows(
            target.to(dtype), shape, time_dim
        )

    def general(backend_name: str) -> tuple[torch.Tensor, torch.Tensor]:
        value = state_value.to(acc)
        delta = reward.to(acc) + gamma * _not(terminated, acc) * next_state_value.to(acc) - value
        adv = _scan(delta, gamma * lmbda * _not(done, acc), time_dim, backend_name).contiguous()
        return adv.to(dtype), (adv + value).to(dtype)

    return _dispatch(backend, reward.device, fused_ok, triton_fused, torch_fused, general)


# -- TD(lambda) ----------------------------------------------------------------------------


def td_lambda_return_estimate(
    gamma: Scalar,
    lmbda: Scalar,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
    backend: str = "auto",
) -> torch.Tensor:
    """TD(lambda) return (Sutton & Barto 2018, section 12.1).

    ``G[t] = r[t] + gamma (1 - terminated[t]) ((1 - lmbda) V(s[t+1]) + lmbda G[t+1])``,
    with ``G[t+1]`` replaced by ``V(s[t+1])`` at ``done`` steps and at the last step.

    Args:
        gamma: discount factor (float, or tensor broadcastable to the inputs).
        lmbda: lambda in ``[0, 1]`` (same).
        next_state_value: ``V(s[t+1])``, ``[*B, T, *F]``.
        reward: same shape.
        done: bool, same shape.
        terminated: bool, same shape (``done`` when ``None``).
        rolling_gamma: TorchRL's argument; only ``None`` / ``True`` (each step's gamma
            discounts the step after it, the usual recursion) is supported.
        time_dim: the time dimension.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Returns:
        the returns, shaped like ``reward``.

    Examples:
        >>> nv = torch.ones(2, 1)
        >>> d = torch.zeros(2, 1, dtype=torch.bool)
        >>> td_lambda_return_estimate(1.0, 0.5, nv, torch.zeros(2, 1), d).squeeze(-1)
        tensor([1., 1.])
    """
    if rolling_gamma is False:
        raise NotImplementedError(
            "rolling_gamma=False (each gamma tied to the whole upcoming trajectory) is not "
            "supported; use rolling_gamma=None or True."
        )
    if terminated is None:
        terminated = done
    time_dim = check_inputs(
        time_dim,
        _FLAGS,
        next_state_value=next_state_value,
        reward=reward,
        done=done,
        terminated=terminated,
    )
    dtype = _common_dtype(next_state_value, reward)
    acc = acc_dtype(dtype)
    shape = reward.shape
    fused_ok = (
        is_scalar(gamma)
        and is_scalar(lmbda)
        and not _needs_grad(next_state_value, reward, gamma, lmbda)
    )

    def triton_fused() -> torch.Tensor:
        from rl_kernels.scans._triton_scan import triton_td_lambda

        rows = [_rows(t.to(dtype), time_dim).contiguous() for t in (next_state_value, reward)]
        flags = [_rows(t, time_dim).contiguous() for t in (done, terminated)]
        ret = triton_td_lambda(*rows, *flags, scalar_value(gamma), scalar_value(lmbda))
        return _from_rows(ret, shape, time_dim)

    def general(backend_name: str) -> torch.Tensor:
        boot = gamma * _not(terminated, acc)
        cut = (done | _last_step(shape, time_dim, reward.device)).to(acc)
        weight = (1 - lmbda) + lmbda * cut
        x = reward.to(acc) + boot * next_state_value.to(acc) * weight
        ret = _scan(x, boot * lmbda * (1 - cut), time_dim, backend_name)
        return ret.to(dtype).contiguous()

    def torch_fused() -> torch.Tensor:
        g, lm = scalar_value(gamma), scalar_value(lmbda)
        next_value, rew = (_rows(t, time_dim).to(acc) for t in (next_state_value, reward))
        term = _rows(terminated, time_dim)
        cut = _rows(done, time_dim).clone()
        cut[:, -1] = True
        boot_next = torch.mul(next_value, g).masked_fill_(term, 0.0)
        # ((1 - lmbda) V(s') + lmbda G[t+1]), with G[t+1] = V(s') where the recursion is cut
        x = torch.where(cut, boot_next, boot_next * (1 - lm)).add_(rew)
        discount = torch.full(x.shape[::-1], g * lm, dtype=acc, device=x.device)
        discount.masked_fill_((cut | term).t(), 0.0)
        ret = reverse_scan_time_major(x.t().contiguous(), discount).t().contiguous()
        return _from_rows(ret.to(dtype), shape, time_dim)

    return _dispatch(backend, reward.device, fused_ok, triton_fused, torch_fused, general)


def td_lambda_advantage_estimate(
    gamma: Scalar,
    lmbda: Scalar,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
    backend: str = "auto",
) -> torch.Tensor:
    """TD(lambda) return minus ``state_value`` (see :func:`td_lambda_return_estimate`).

    Examples:
        >>> z = torch.zeros(2, 1)
        >>> d = torch.zeros(2, 1, dtype=torch.bool)
        >>> td_lambda_advantage_estimate(1.0, 0.5, z, z, torch.ones(2, 1), d).squeeze(-1)
        tensor([1.5000, 1.0000])
    """
    check_inputs(time_dim, _FLAGS, state_value=state_value, next_state_value=next_state_value)
    ret = td_lambda_return_estimate(
        gamma,
        lmbda,
        next_state_value,
        reward,
        done,
        terminated,
        rolling_gamma,
        time_dim=time_dim,
        backend=backend,
    )
    return ret - state_value


# -- V-trace -------------------------------------------------------------------------------


def vtrace_advantage_estimate(
    gamma: Scalar,
    log_pi: torch.Tensor,
    log_mu: torch.Tensor,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rho_thresh: Scalar = 1.0,
    c_thresh: Scalar = 1.0,
    *,
    time_dim: int = -2,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace targets (Espeholt et al. 2018, IMPALA, arXiv:1802.01561).

    With ``rho = min(pi / mu, rho_thresh)`` and ``c = min(pi / mu, c_thresh)``:
    ``vs[t] - V(s[t]) = rho[t] delta[t] + gamma (1 - done[t]) c[t] (vs[t+1] - V(s[t+1]))``
    and the policy-gradient advantage is
    ``rho[t] (r[t] + gamma (1 - terminated[t]) vs[t+1] - V(s[t]))``, where
    ``vs[t+1] = V(s[t+1])`` at ``done`` steps and at the last step.

    Args:
        gamma: discount factor (float, or tensor broadcastable to the inputs).
        log_pi: log-probabilities of the actions under the learner policy, ``[*B, T, *F]``.
        log_mu: log-probabilities under the behaviour policy, same shape.
        state_value: ``V(s[t])``, same shape.
        next_state_value: ``V(s[t+1])``, same shape.
        reward: same shape.
        done: bool, same shape.
        terminated: bool, same shape (``done`` when ``None``).
        rho_thresh: truncation of the importance weights in the TD errors.
        c_thresh: truncation of the traces.
        time_dim: the time dimension.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Returns:
        ``(advantage, vs)``.

    Examples:
        >>> z = torch.zeros(2, 1)
        >>> d = torch.zeros(2, 1, dtype=torch.bool)
        >>> adv, vs = vtrace_advantage_estimate(1.0, z, z, z, z, torch.ones(2, 1), d)
        >>> vs.squeeze(-1)
        tensor([2., 1.])
    """
    if terminated is None:
        terminated = done
    time_dim = check_inputs(
        time_dim,
        _FLAGS,
        log_pi=log_pi,
        log_mu=log_mu,
        state_value=state_value,
        next_state_value=next_state_value,
        reward=reward,
        done=done,
        terminated=terminated,
    )
    floats = (log_pi, log_mu, state_value, next_state_value, reward)
    dtype = _common_dtype(*floats)
    acc = acc_dtype(dtype)
    shape = reward.shape
    scalars = (gamma, rho_thresh, c_thresh)
    fused_ok = all(is_scalar(s) for s in scalars) and not _needs_grad(*floats, *scalars)

    def triton_fused() -> tuple[torch.Tensor, torch.Tensor]:
        from rl_kernels.scans._triton_scan import triton_vtrace

        rows = [_rows(t.to(dtype), time_dim).contiguous() for t in floats]
        flags = [_rows(t, time_dim).contiguous() for t in (done, terminated)]
        adv, vs = triton_vtrace(*rows, *flags, *(scalar_value(s) for s in scalars))
        return _from_rows(adv, shape, time_dim), _from_rows(vs, shape, time_dim)

    def general(backend_name: str) -> tuple[torch.Tensor, torch.Tensor]:
        lp, lm, value, next_value, rew = (t.to(acc) for t in floats)
        ratio = (lp - lm).exp()
        rho = ratio.clamp_max(rho_thresh)
        c = ratio.clamp_max(c_thresh)
        boot = gamma * _not(terminated, acc)
        deltas = rho * (rew + boot * next_value - value)
        vs = _scan(deltas, gamma * _not(done, acc) * c, time_dim, backend_name) + value
        vs_next = torch.where(
            done | _last_step(shape, time_dim, reward.device),
            next_value,
            vs.roll(-1, dims=time_dim),
        )
        advantage = rho * (rew + boot * vs_next - value)
        return advantage.to(dtype).contiguous(), vs.to(dtype).contiguous()

    return _dispatch(
        backend, reward.device, fused_ok, triton_fused, lambda: general("torch"), general
    )
