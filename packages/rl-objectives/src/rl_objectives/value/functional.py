"""Pure, vectorised return and advantage estimators.

Every function takes tensors shaped ``[*batch, T, *F]`` (``T`` at ``time_dim``,
``-2`` by default, so the usual layout is ``[*batch, T, 1]``) and never loops
over time in Python: each recurrence is solved by
:func:`rl_objectives.value._scan.reverse_linear_scan`.

Episode ends follow ``docs/contract.md``: ``done = terminated | truncated``.
A ``terminated`` step does not bootstrap (the next state has value zero); a
``truncated`` step bootstraps from ``next_state_value``, the value of the true
final observation; and the recursion never crosses a ``done`` step, since the
following entry belongs to another episode. When ``terminated`` is not given
it is taken equal to ``done`` (TorchRL's behaviour).

The names and argument orders are TorchRL's (``torchrl.objectives.value.functional``);
the ``vec_*`` names are aliases kept so that ported code runs unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rl_objectives._checks import check_factor
from rl_objectives.functional import td_target
from rl_objectives.value._scan import reverse_linear_scan

__all__ = [
    "discounted_cumsum",
    "generalized_advantage_estimate",
    "reward2go",
    "td0_advantage_estimate",
    "td0_return_estimate",
    "td1_advantage_estimate",
    "td1_return_estimate",
    "td_lambda_advantage_estimate",
    "td_lambda_return_estimate",
    "vec_generalized_advantage_estimate",
    "vec_td1_advantage_estimate",
    "vec_td1_return_estimate",
    "vec_td_lambda_advantage_estimate",
    "vec_td_lambda_return_estimate",
    "vtrace_advantage_estimate",
]

Scalar = float | torch.Tensor


def _check(time_dim: int, **tensors: torch.Tensor | None) -> torch.Size:
    """Check that all given tensors share one shape with a time dimension; return it."""
    named = {k: v for k, v in tensors.items() if v is not None}
    first_name, first = next(iter(named.items()))
    shape = first.shape
    for name, value in named.items():
        if value.shape != shape:
            raise ValueError(
                f"{name} has shape {tuple(value.shape)} but {first_name} has shape "
                f"{tuple(shape)}: every input must be [*batch, T, *F] with the same shape. "
                "Add the trailing feature dim (e.g. reward.unsqueeze(-1)) where it is missing."
            )
    if not -len(shape) <= time_dim < len(shape):
        raise ValueError(
            f"time_dim={time_dim} is out of range for inputs of shape {tuple(shape)}; "
            "inputs must be [*batch, T, *F] (time_dim=-2 for [*batch, T, 1])."
        )
    for name in ("done", "terminated"):
        value = named.get(name)
        if value is not None and value.dtype != torch.bool:
            raise TypeError(f"{name} must be a bool tensor, got dtype {value.dtype}.")
    return shape


def _scan(x: torch.Tensor, g: torch.Tensor, time_dim: int) -> torch.Tensor:
    """Solve ``y[t] = x[t] + g[t] * y[t+1]`` along ``time_dim``."""
    g = g.expand_as(x)
    y = reverse_linear_scan(x.movedim(time_dim, -1), g.movedim(time_dim, -1))
    return y.movedim(-1, time_dim)


def _not(flag: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return (~flag).to(like.dtype)


def _last_step(like: torch.Tensor, time_dim: int) -> torch.Tensor:
    """A bool mask, ``True`` on the last step along ``time_dim`` (broadcastable to ``like``)."""
    steps = like.shape[time_dim]
    mask = torch.arange(steps, device=like.device) == steps - 1
    shape = [1] * like.ndim
    shape[time_dim] = steps
    return mask.view(shape)


def _fixed_gamma_per_start(
    rolling: Callable[..., torch.Tensor],
    gamma: Scalar,
    lmbda: Scalar,
    tensors: tuple[torch.Tensor, ...],
    time_dim: int,
) -> torch.Tensor:
    """``rolling_gamma=False``: the return from step ``k`` discounts its whole future with
    ``gamma[k]`` (and ``lmbda[k]``). Each start gets its own copy of the sequence (a new leading
    dim of size ``T``, so ``O(T^2)`` memory) and keeps its own step on the diagonal."""
    ref = tensors[1]
    steps = ref.shape[time_dim]
    td = time_dim % ref.ndim + 1  # the time dim once a leading "start" dim is added

    def per_start(x: Scalar) -> Scalar:
        if not isinstance(x, torch.Tensor) or x.shape != ref.shape:
            return x
        starts = x.movedim(time_dim, 0).unsqueeze(td)  # [T(start), ..., 1 (time), ...]
        return starts.expand(steps, *ref.shape)

    expanded = tuple(t.unsqueeze(0).expand(steps, *t.shape) for t in tensors)
    out = rolling(per_start(gamma), per_start(lmbda), *expanded, time_dim=td)
    return torch.diagonal(out, dim1=0, dim2=td).movedim(-1, time_dim)


def _check_rolling(
    rolling_gamma: bool | None, gamma: Scalar, lmbda: Scalar, like: torch.Tensor
) -> bool:
    """``rolling_gamma`` resolved (``None`` means ``True``); ``False`` needs per-step gammas."""
    if rolling_gamma is None or rolling_gamma:
        return True
    per_step = any(isinstance(x, torch.Tensor) and x.shape == like.shape for x in (gamma, lmbda))
    if not per_step:
        raise RuntimeError(
            "rolling_gamma=False is expected only with time-sensitive gamma (or lmbda) values: "
            f"pass gamma as a tensor of the inputs' shape {tuple(like.shape)}."
        )
    return False


def discounted_cumsum(x: torch.Tensor, discount: Scalar, *, time_dim: int = -2) -> torch.Tensor:
    """Reverse discounted cumulative sum ``y[t] = x[t] + discount[t] * y[t + 1]``.

    Args:
        x: ``[*batch, T, *F]`` values.
        discount: a float or a tensor broadcastable to ``x`` (per-step discounts;
            put zero where the sum must restart).
        time_dim: the time dimension.

    Returns:
        ``y`` with the shape of ``x``.

    Examples:
        >>> discounted_cumsum(torch.ones(3, 1), 0.5)
        tensor([[1.7500],
                [1.5000],
                [1.0000]])
    """
    _check(time_dim, x=x)
    discount = torch.as_tensor(discount, dtype=x.dtype, device=x.device)
    return _scan(x, discount.expand_as(x), time_dim)


def reward2go(
    reward: torch.Tensor, done: torch.Tensor, gamma: Scalar = 0.99, *, time_dim: int = -2
) -> torch.Tensor:
    """Discounted reward-to-go inside each episode (no bootstrap).

    Args:
        reward: ``[*batch, T, *F]`` rewards.
        done: bool, same shape; the sum restarts after each ``True``.
        gamma: discount factor.
        time_dim: the time dimension.

    Returns:
        ``sum_k gamma^k r[t + k]`` up to the end of the episode.

    Examples:
        >>> r = torch.ones(4, 1)
        >>> d = torch.tensor([[False], [True], [False], [False]])
        >>> reward2go(r, d, gamma=1.0).squeeze(-1)
        tensor([2., 1., 2., 1.])
    """
    _check(time_dim, reward=reward, done=done)
    return _scan(reward, gamma * _not(done, reward), time_dim)


def td0_return_estimate(
    gamma: Scalar,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    done: torch.Tensor | None = None,
) -> torch.Tensor:
    """One-step bootstrapped return ``r + gamma * (1 - terminated) * V(s')``.

    Args:
        gamma: discount factor.
        next_state_value: ``V(s')``, ``[*batch, *F]``.
        reward: same shape.
        terminated: bool, same shape; falls back on ``done`` when ``None``.
        done: bool, used only when ``terminated`` is ``None``.

    Examples:
        >>> td0_return_estimate(0.5, torch.ones(2, 1), torch.ones(2, 1),
        ...                     torch.tensor([[False], [True]])).squeeze(-1)
        tensor([1.5000, 1.0000])
    """
    check_factor("gamma", gamma, "td0_return_estimate")
    if terminated is None:
        terminated = done
    if terminated is None:
        return reward + gamma * next_state_value
    _check(-1, next_state_value=next_state_value, reward=reward, terminated=terminated)
    return td_target(reward, gamma * _not(terminated, reward), next_state_value)


def td0_advantage_estimate(
    gamma: Scalar,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
) -> torch.Tensor:
    """One-step TD error ``r + gamma * (1 - terminated) * V(s') - V(s)``.

    Examples:
        >>> td0_advantage_estimate(1.0, torch.ones(1, 1), torch.ones(1, 1),
        ...                        torch.ones(1, 1), torch.zeros(1, 1, dtype=torch.bool))
        tensor([[1.]])
    """
    if terminated is None:
        terminated = done
    _check(-1, state_value=state_value, next_state_value=next_state_value, reward=reward)
    return td0_return_estimate(gamma, next_state_value, reward, terminated) - state_value


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
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation (Schulman et al. 2016, arXiv:1506.02438).

    ``delta[t] = r[t] + gamma * (1 - terminated[t]) * V(s[t+1]) - V(s[t])`` and
    ``A[t] = delta[t] + gamma * lmbda * (1 - done[t]) * A[t+1]``.

    Args:
        gamma: discount factor in ``[0, 1]`` (float or tensor broadcastable to the inputs; a
            float out of range raises, a tensor is not checked: that would sync the device).
        lmbda: GAE lambda in ``[0, 1]`` (checked as ``gamma``).
        state_value: ``V(s[t])``, ``[*batch, T, *F]``.
        next_state_value: ``V(s[t+1])``, same shape.
        reward: same shape.
        done: bool, same shape.
        terminated: bool, same shape (``done`` when ``None``).
        time_dim: the time dimension.

    Returns:
        ``(advantage, value_target)`` with ``value_target = advantage + state_value``.

    Examples:
        >>> v = torch.zeros(3, 1)
        >>> r = torch.ones(3, 1)
        >>> d = torch.zeros(3, 1, dtype=torch.bool)
        >>> adv, target = generalized_advantage_estimate(1.0, 1.0, v, v, r, d)
        >>> adv.squeeze(-1)
        tensor([3., 2., 1.])
    """
    check_factor("gamma", gamma, "generalized_advantage_estimate")
    check_factor("lmbda", lmbda, "generalized_advantage_estimate")
    if terminated is None:
        terminated = done
    _check(
        time_dim,
        state_value=state_value,
        next_state_value=next_state_value,
        reward=reward,
        done=done,
        terminated=terminated,
    )
    delta = reward + gamma * _not(terminated, reward) * next_state_value - state_value
    advantage = _scan(delta, gamma * lmbda * _not(done, reward), time_dim)
    return advantage, advantage + state_value


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
) -> torch.Tensor:
    """TD(lambda) return (Sutton & Barto 2018, section 12.1).

    ``G[t] = r[t] + gamma * (1 - terminated[t]) * ((1 - lmbda) V(s[t+1]) + lmbda G[t+1])``,
    where ``G[t+1]`` is replaced by ``V(s[t+1])`` at the last step and at ``done`` steps.

    Args:
        gamma: discount factor.
        lmbda: lambda in ``[0, 1]``.
        next_state_value: ``V(s[t+1])``, ``[*batch, T, *F]``.
        reward: same shape.
        done: bool, same shape.
        terminated: bool, same shape (``done`` when ``None``).
        rolling_gamma: with per-step ``gamma`` (or ``lmbda``) tensors, ``True`` (default) ties
            each one to its own step (``G[t]`` uses ``gamma[t]``, ``gamma[t+1]``...); ``False``
            makes the return from step ``k`` use ``gamma[k]`` for its whole future (TorchRL's
            two readings). ``False`` with scalar factors raises.
        time_dim: the time dimension.

    Examples:
        >>> nv = torch.ones(2, 1)
        >>> r = torch.zeros(2, 1)
        >>> d = torch.zeros(2, 1, dtype=torch.bool)
        >>> td_lambda_return_estimate(1.0, 0.5, nv, r, d).squeeze(-1)
        tensor([1., 1.])
    """
    check_factor("gamma", gamma, "td_lambda_return_estimate")
    check_factor("lmbda", lmbda, "td_lambda_return_estimate")
    if terminated is None:
        terminated = done
    _check(
        time_dim, next_state_value=next_state_value, reward=reward, done=done, terminated=terminated
    )
    if not _check_rolling(rolling_gamma, gamma, lmbda, reward):
        return _fixed_gamma_per_start(
            td_lambda_return_estimate,
            gamma,
            lmbda,
            (next_state_value, reward, done, terminated),
            time_dim,
        )
    boot = gamma * _not(terminated, reward)
    cut = done | _last_step(reward, time_dim)
    cut_f = cut.to(reward.dtype)
    x = reward + boot * next_state_value * ((1 - lmbda) + lmbda * cut_f)
    return _scan(x, boot * lmbda * (1 - cut_f), time_dim)


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
) -> torch.Tensor:
    """TD(lambda) return minus ``state_value`` (``rolling_gamma``: see :func:`td_lambda_return_estimate`).

    Examples:
        >>> z = torch.zeros(2, 1)
        >>> td_lambda_advantage_estimate(1.0, 0.5, z, z, torch.ones(2, 1),
        ...                              torch.zeros(2, 1, dtype=torch.bool)).squeeze(-1)
        tensor([1.5000, 1.0000])
    """
    _check(time_dim, state_value=state_value, next_state_value=next_state_value)
    ret = td_lambda_return_estimate(
        gamma, lmbda, next_state_value, reward, done, terminated, rolling_gamma, time_dim=time_dim
    )
    return ret - state_value


def td1_return_estimate(
    gamma: Scalar,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) (Monte-Carlo) return, bootstrapped at truncations and at the last step.

    ``rolling_gamma``: see :func:`td_lambda_return_estimate`.

    Examples:
        >>> r = torch.ones(3, 1)
        >>> d = torch.zeros(3, 1, dtype=torch.bool)
        >>> td1_return_estimate(1.0, torch.zeros(3, 1), r, d).squeeze(-1)
        tensor([3., 2., 1.])
    """
    return td_lambda_return_estimate(
        gamma, 1.0, next_state_value, reward, done, terminated, rolling_gamma, time_dim=time_dim
    )


def td1_advantage_estimate(
    gamma: Scalar,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) return minus ``state_value`` (``rolling_gamma``: see :func:`td_lambda_return_estimate`).

    Examples:
        >>> z = torch.zeros(2, 1)
        >>> td1_advantage_estimate(1.0, z, z, torch.ones(2, 1),
        ...                        torch.zeros(2, 1, dtype=torch.bool)).squeeze(-1)
        tensor([2., 1.])
    """
    return td_lambda_advantage_estimate(
        gamma,
        1.0,
        state_value,
        next_state_value,
        reward,
        done,
        terminated,
        rolling_gamma,
        time_dim=time_dim,
    )


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
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace off-policy targets (Espeholt et al. 2018, IMPALA, arXiv:1802.01561).

    With ``rho = min(pi/mu, rho_thresh)``, ``c = min(pi/mu, c_thresh)``:
    ``v[t] - V(s[t]) = rho[t] delta[t] + gamma (1 - done[t]) c[t] (v[t+1] - V(s[t+1]))`` and
    the policy-gradient advantage is ``rho[t] (r[t] + gamma (1 - terminated[t]) v[t+1] - V(s[t]))``,
    with ``v[t+1] = V(s[t+1])`` at ``done`` steps and at the last step.

    Args:
        gamma: discount factor.
        log_pi: log-probability of the actions under the learner policy, ``[*batch, T, *F]``.
        log_mu: log-probability under the behaviour policy, same shape.
        state_value: ``V(s[t])``, same shape.
        next_state_value: ``V(s[t+1])``, same shape.
        reward: same shape.
        done: bool, same shape.
        terminated: bool, same shape (``done`` when ``None``).
        rho_thresh: truncation of the importance weight in the TD errors.
        c_thresh: truncation of the trace coefficients.
        time_dim: the time dimension.

    Returns:
        ``(advantage, value_target)``.

    Examples:
        >>> z = torch.zeros(2, 1)
        >>> d = torch.zeros(2, 1, dtype=torch.bool)
        >>> adv, vs = vtrace_advantage_estimate(1.0, z, z, z, z, torch.ones(2, 1), d)
        >>> vs.squeeze(-1)
        tensor([2., 1.])
    """
    check_factor("gamma", gamma, "vtrace_advantage_estimate")
    if terminated is None:
        terminated = done
    _check(
        time_dim,
        log_pi=log_pi,
        log_mu=log_mu,
        state_value=state_value,
        next_state_value=next_state_value,
        reward=reward,
        done=done,
        terminated=terminated,
    )
    ratio = (log_pi - log_mu).exp()
    rho = ratio.clamp_max(rho_thresh)
    c = ratio.clamp_max(c_thresh)
    boot = gamma * _not(terminated, reward)
    deltas = rho * (reward + boot * next_state_value - state_value)
    vs_minus_v = _scan(deltas, gamma * _not(done, reward) * c, time_dim)
    vs = vs_minus_v + state_value
    vs_next = torch.roll(vs, -1, dims=time_dim)
    vs_next = torch.where(done | _last_step(vs, time_dim), next_state_value, vs_next)
    advantage = rho * (reward + boot * vs_next - state_value)
    return advantage, vs


vec_generalized_advantage_estimate = generalized_advantage_estimate
vec_td_lambda_return_estimate = td_lambda_return_estimate
vec_td_lambda_advantage_estimate = td_lambda_advantage_estimate
vec_td1_return_estimate = td1_return_estimate
vec_td1_advantage_estimate = td1_advantage_estimate
