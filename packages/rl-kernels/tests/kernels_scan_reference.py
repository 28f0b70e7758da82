"""Independent references for the scans: plain Python loops over time, one row at a time.

Written from the papers' recurrences, step by step, with no vectorisation and no
shared code with ``rl_kernels``. Inputs are ``[*B, T, 1]`` with time at -2.
"""

from __future__ import annotations

import torch


def _rows(x: torch.Tensor) -> list[torch.Tensor]:
    return list(x.reshape(-1, x.shape[-2]).unbind(0))


def _stack(rows: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    return torch.stack(rows, 0).reshape(like.shape)


def gae(gamma, lmbda, value, next_value, reward, done, terminated):
    """A[t] = delta[t] + gamma * lmbda * (1 - done[t]) * A[t+1]."""
    out_adv = []
    for v, nv, r, d, te in zip(
        *map(_rows, (value, next_value, reward, done, terminated)), strict=True
    ):
        steps = len(r)
        adv = [None] * steps
        following = 0.0
        for t in reversed(range(steps)):
            delta = r[t] + (0.0 if te[t] else gamma * nv[t]) - v[t]
            following = delta + (0.0 if d[t] else gamma * lmbda * following)
            adv[t] = following
        out_adv.append(torch.stack(adv))
    adv = _stack(out_adv, reward)
    return adv, adv + value


def td_lambda(gamma, lmbda, next_value, reward, done, terminated):
    """G[t] = r[t] + gamma (1 - term) ((1 - lmbda) V[t+1] + lmbda G[t+1]); G[t+1] = V[t+1] at cuts."""
    out = []
    for nv, r, d, te in zip(*map(_rows, (next_value, reward, done, terminated)), strict=True):
        steps = len(r)
        ret = [None] * steps
        for t in reversed(range(steps)):
            if te[t]:
                ret[t] = r[t] + 0.0 * nv[t]
                continue
            following = nv[t] if (d[t] or t == steps - 1) else ret[t + 1]
            ret[t] = r[t] + gamma * ((1 - lmbda) * nv[t] + lmbda * following)
        out.append(torch.stack(ret))
    return _stack(out, reward)


def vtrace(gamma, log_pi, log_mu, value, next_value, reward, done, terminated, rho_bar, c_bar):
    """IMPALA's v-trace targets vs and advantages rho (r + gamma vs[t+1] - V)."""
    out_adv, out_vs = [], []
    rows = map(_rows, (log_pi, log_mu, value, next_value, reward, done, terminated))
    for lp, lm, v, nv, r, d, te in zip(*rows, strict=True):
        steps = len(r)
        vs = [None] * steps
        for t in reversed(range(steps)):
            ratio = torch.exp(lp[t] - lm[t])
            rho, c = torch.clamp(ratio, max=rho_bar), torch.clamp(ratio, max=c_bar)
            delta = rho * (r[t] + (0.0 if te[t] else gamma * nv[t]) - v[t])
            correction = 0.0
            if not d[t] and t < steps - 1:
                correction = gamma * c * (vs[t + 1] - v[t + 1])
            vs[t] = v[t] + delta + correction
        adv = []
        for t in range(steps):
            rho = torch.clamp(torch.exp(lp[t] - lm[t]), max=rho_bar)
            following = nv[t] if (d[t] or t == steps - 1) else vs[t + 1]
            adv.append(rho * (r[t] + (0.0 if te[t] else gamma * following) - v[t]))
        out_adv.append(torch.stack(adv))
        out_vs.append(torch.stack(vs))
    return _stack(out_adv, reward), _stack(out_vs, reward)


def reward_to_go(reward, done, gamma):
    """y[t] = r[t] + gamma (1 - done[t]) y[t+1]."""
    out = []
    for r, d in zip(_rows(reward), _rows(done), strict=True):
        steps = len(r)
        y = [None] * steps
        for t in reversed(range(steps)):
            y[t] = r[t] + (0.0 if (d[t] or t == steps - 1) else gamma * y[t + 1])
        out.append(torch.stack(y))
    return _stack(out, reward)
