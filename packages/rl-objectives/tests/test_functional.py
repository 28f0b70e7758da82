"""The pure estimators against plain reversed loops, on random data with dones and truncations."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_objectives.value import functional as F
from rl_objectives.value._scan import (
    DOUBLING_MAX_NUMEL,
    _blocked_scan,
    _doubling_scan,
    reverse_linear_scan,
)

SETTINGS = settings(max_examples=25, deadline=None)


def _data(seed: int, batch: tuple[int, ...], steps: int, time_dim: int):
    g = torch.Generator().manual_seed(seed)
    shape = (*batch, steps, 1)
    terminated = torch.rand(shape, generator=g) < 0.15
    truncated = (torch.rand(shape, generator=g) < 0.15) & ~terminated
    data = {
        "value": torch.randn(shape, generator=g, dtype=torch.float64),
        "next_value": torch.randn(shape, generator=g, dtype=torch.float64),
        "reward": torch.randn(shape, generator=g, dtype=torch.float64),
        "log_pi": -torch.rand(shape, generator=g, dtype=torch.float64),
        "log_mu": -torch.rand(shape, generator=g, dtype=torch.float64),
        "terminated": terminated,
        "done": terminated | truncated,
    }
    # move time from -2 to time_dim
    return {k: v.movedim(-2, time_dim) for k, v in data.items()}


def _to_loop(x, time_dim):
    return x.movedim(time_dim, 0)


def _from_loop(x, time_dim):
    return x.movedim(0, time_dim)


def ref_gae(gamma, lmbda, v, nv, r, done, term, time_dim):
    v, nv, r, done, term = (_to_loop(x, time_dim) for x in (v, nv, r, done, term))
    adv = torch.zeros_like(r)
    running = torch.zeros_like(r[0])
    for t in reversed(range(r.shape[0])):
        delta = r[t] + gamma * (~term[t]).double() * nv[t] - v[t]
        running = delta + gamma * lmbda * (~done[t]).double() * running
        adv[t] = running
    return _from_loop(adv, time_dim), _from_loop(adv + v, time_dim)


def ref_td_lambda(gamma, lmbda, nv, r, done, term, time_dim):
    nv, r, done, term = (_to_loop(x, time_dim) for x in (nv, r, done, term))
    out = torch.zeros_like(r)
    steps = r.shape[0]
    for t in reversed(range(steps)):
        g_next = nv[t] if t == steps - 1 else torch.where(done[t], nv[t], out[t + 1])
        out[t] = r[t] + gamma * (~term[t]).double() * ((1 - lmbda) * nv[t] + lmbda * g_next)
    return _from_loop(out, time_dim)


def ref_vtrace(gamma, log_pi, log_mu, v, nv, r, done, term, rho_t, c_t, time_dim):
    log_pi, log_mu, v, nv, r, done, term = (
        _to_loop(x, time_dim) for x in (log_pi, log_mu, v, nv, r, done, term)
    )
    ratio = (log_pi - log_mu).exp()
    rho, c = ratio.clamp(max=rho_t), ratio.clamp(max=c_t)
    steps = r.shape[0]
    vs = torch.zeros_like(r)
    acc = torch.zeros_like(r[0])
    for t in reversed(range(steps)):
        delta = rho[t] * (r[t] + gamma * (~term[t]).double() * nv[t] - v[t])
        acc = delta + gamma * (~done[t]).double() * c[t] * acc
        vs[t] = acc + v[t]
    adv = torch.zeros_like(r)
    for t in range(steps):
        nxt = nv[t] if (t == steps - 1) else torch.where(done[t], nv[t], vs[t + 1])
        adv[t] = rho[t] * (r[t] + gamma * (~term[t]).double() * nxt - v[t])
    return _from_loop(adv, time_dim), _from_loop(vs, time_dim)


shapes = st.sampled_from([((), 1), ((), 7), ((3,), 17), ((2, 3), 33), ((4,), 100), ((1,), 260)])


@SETTINGS
@given(seed=st.integers(0, 10_000), shape=shapes, time_first=st.booleans(),
       gamma=st.floats(0.0, 1.0), lmbda=st.floats(0.0, 1.0))  # fmt: skip
def test_gae_matches_loop(seed, shape, time_first, gamma, lmbda):
    batch, steps = shape
    time_dim = 0 if time_first else -2
    d = _data(seed, batch, steps, time_dim)
    adv, target = F.generalized_advantage_estimate(
        gamma, lmbda, d["value"], d["next_value"], d["reward"], d["done"], d["terminated"],
        time_dim=time_dim,
    )  # fmt: skip
    ref_adv, ref_target = ref_gae(
        gamma, lmbda, d["value"], d["next_value"], d["reward"], d["done"], d["terminated"], time_dim
    )
    torch.testing.assert_close(adv, ref_adv)
    torch.testing.assert_close(target, ref_target)


@SETTINGS
@given(seed=st.integers(0, 10_000), shape=shapes, time_first=st.booleans(),
       gamma=st.floats(0.0, 1.0), lmbda=st.floats(0.0, 1.0))  # fmt: skip
def test_td_lambda_td1_td0_match_loop(seed, shape, time_first, gamma, lmbda):
    batch, steps = shape
    time_dim = 0 if time_first else -2
    d = _data(seed, batch, steps, time_dim)
    args = (d["next_value"], d["reward"], d["done"], d["terminated"])
    got = F.td_lambda_return_estimate(gamma, lmbda, *args, time_dim=time_dim)
    torch.testing.assert_close(got, ref_td_lambda(gamma, lmbda, *args, time_dim))
    got1 = F.td1_return_estimate(gamma, *args, time_dim=time_dim)
    torch.testing.assert_close(got1, ref_td_lambda(gamma, 1.0, *args, time_dim))
    got0 = F.td0_return_estimate(gamma, d["next_value"], d["reward"], d["terminated"])
    torch.testing.assert_close(got0, ref_td_lambda(gamma, 0.0, *args, time_dim))
    adv = F.td_lambda_advantage_estimate(gamma, lmbda, d["value"], *args, time_dim=time_dim)
    torch.testing.assert_close(adv, got - d["value"])


@SETTINGS
@given(seed=st.integers(0, 10_000), shape=shapes, time_first=st.booleans(),
       gamma=st.floats(0.0, 1.0), thresh=st.sampled_from([(1.0, 1.0), (2.0, 0.5), (1.5, 1.5)]))  # fmt: skip
def test_vtrace_matches_loop(seed, shape, time_first, gamma, thresh):
    batch, steps = shape
    time_dim = 0 if time_first else -2
    d = _data(seed, batch, steps, time_dim)
    args = (
        d["log_pi"],
        d["log_mu"],
        d["value"],
        d["next_value"],
        d["reward"],
        d["done"],
        d["terminated"],
    )
    adv, vs = F.vtrace_advantage_estimate(gamma, *args, *thresh, time_dim=time_dim)
    ref_adv, ref_vs = ref_vtrace(gamma, *args, *thresh, time_dim)
    torch.testing.assert_close(vs, ref_vs)
    torch.testing.assert_close(adv, ref_adv)


@SETTINGS
@given(seed=st.integers(0, 10_000), shape=shapes, gamma=st.floats(0.0, 1.0))
def test_reward2go_and_cumsum_match_loop(seed, shape, gamma):
    batch, steps = shape
    d = _data(seed, batch, steps, -2)
    r, done = d["reward"], d["done"]
    ref = torch.zeros_like(r)
    running = torch.zeros_like(r[..., 0, :])
    for t in reversed(range(steps)):
        running = r[..., t, :] + gamma * (~done[..., t, :]).double() * running
        ref[..., t, :] = running
    torch.testing.assert_close(F.reward2go(r, done, gamma), ref)
    plain = F.discounted_cumsum(r, gamma)
    ref_plain = F.reward2go(r, torch.zeros_like(done), gamma)
    torch.testing.assert_close(plain, ref_plain)


@pytest.mark.parametrize("time_dim", [0, -2])
def test_estimators_match_loop_above_the_doubling_threshold(time_dim):
    # [130, 260, 1] has more than DOUBLING_MAX_NUMEL elements: the blocked scan runs
    d = _data(3, (130,), 260, time_dim)
    v, nv, r, done, term = (d[k] for k in ("value", "next_value", "reward", "done", "terminated"))
    assert v.numel() > DOUBLING_MAX_NUMEL
    adv, target = F.generalized_advantage_estimate(
        0.99, 0.95, v, nv, r, done, term, time_dim=time_dim
    )
    ref_adv, ref_target = ref_gae(0.99, 0.95, v, nv, r, done, term, time_dim)
    torch.testing.assert_close(adv, ref_adv)
    torch.testing.assert_close(target, ref_target)
    lam = F.td_lambda_return_estimate(0.99, 0.9, nv, r, done, term, time_dim=time_dim)
    torch.testing.assert_close(lam, ref_td_lambda(0.99, 0.9, nv, r, done, term, time_dim))
    got = F.vtrace_advantage_estimate(
        0.99, d["log_pi"], d["log_mu"], v, nv, r, done, term, time_dim=time_dim
    )
    ref = ref_vtrace(0.99, d["log_pi"], d["log_mu"], v, nv, r, done, term, 1.0, 1.0, time_dim)
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b)


SCANS = {"doubling": _doubling_scan, "blocked": _blocked_scan, "dispatch": reverse_linear_scan}


def _ref_scan(x, g):
    ref = torch.zeros_like(x)
    acc = torch.zeros_like(x[..., 0])
    for t in reversed(range(x.shape[-1])):
        acc = x[..., t] + g[..., t] * acc
        ref[..., t] = acc
    return ref


@pytest.mark.parametrize("steps", [1, 2, 3, 8, 9, 16, 17, 18, 64, 65, 1000])
@pytest.mark.parametrize("method", list(SCANS))
def test_scan_long_horizons_are_exact(steps, method):
    x = torch.randn(3, steps, dtype=torch.float64)
    g = torch.rand(3, steps, dtype=torch.float64) * (torch.rand(3, steps) > 0.05)
    torch.testing.assert_close(SCANS[method](x, g), _ref_scan(x, g))


@pytest.mark.parametrize("method", list(SCANS))
def test_scan_gradients_match_loop(method):
    x = torch.randn(2, 3, 70, dtype=torch.float64, requires_grad=True)
    g = (torch.rand(2, 3, 70, dtype=torch.float64) * (torch.rand(2, 3, 70) > 0.1)).requires_grad_()
    w = torch.randn(2, 3, 70, dtype=torch.float64)
    got = torch.autograd.grad((SCANS[method](x, g) * w).sum(), (x, g))
    ref = torch.autograd.grad((_ref_scan(x, g) * w).sum(), (x, g))
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b)


def test_scan_dispatch_covers_both_sides_of_the_threshold():
    for batch in (DOUBLING_MAX_NUMEL // 128, DOUBLING_MAX_NUMEL // 128 + 1):
        x = torch.randn(batch, 128, dtype=torch.float64)
        g = torch.rand(batch, 128, dtype=torch.float64) * (torch.rand(batch, 128) > 0.05)
        torch.testing.assert_close(reverse_linear_scan(x, g), _ref_scan(x, g))
    scalar_g = torch.tensor(0.5, dtype=torch.float64)
    x = torch.randn(300, 200, dtype=torch.float64)
    torch.testing.assert_close(
        reverse_linear_scan(x, scalar_g), _ref_scan(x, scalar_g.expand_as(x))
    )


def test_float32_long_rollout_stays_close_to_float64():
    d = _data(0, (2,), 2000, -2)
    args = [d[k] for k in ("value", "next_value", "reward")]
    adv64, _ = F.generalized_advantage_estimate(0.999, 0.99, *args, d["done"], d["terminated"])
    adv32, _ = F.generalized_advantage_estimate(
        0.999, 0.99, *(a.float() for a in args), d["done"], d["terminated"]
    )
    torch.testing.assert_close(adv32.double(), adv64, atol=1e-4, rtol=1e-4)


def test_gamma_tensor_per_step():
    d = _data(1, (2,), 10, -2)
    gamma = torch.rand(2, 10, 1, dtype=torch.float64)
    adv, _ = F.generalized_advantage_estimate(
        gamma, 0.9, d["value"], d["next_value"], d["reward"], d["done"], d["terminated"]
    )
    ref_adv = torch.zeros_like(adv)
    running = torch.zeros(2, 1, dtype=torch.float64)
    for t in reversed(range(10)):
        delta = (
            d["reward"][:, t]
            + gamma[:, t] * (~d["terminated"][:, t]).double() * d["next_value"][:, t]
            - d["value"][:, t]
        )
        running = delta + gamma[:, t] * 0.9 * (~d["done"][:, t]).double() * running
        ref_adv[:, t] = running
    torch.testing.assert_close(adv, ref_adv)


def test_shape_mismatch_names_the_argument():
    v = torch.zeros(4, 5, 1)
    with pytest.raises(ValueError, match="reward has shape"):
        F.generalized_advantage_estimate(
            0.9, 0.9, v, v, torch.zeros(4, 5), torch.zeros(4, 5, 1, dtype=torch.bool)
        )


def test_non_bool_done_is_rejected():
    v = torch.zeros(5, 1)
    with pytest.raises(TypeError, match="done must be a bool"):
        F.td1_return_estimate(0.9, v, v, torch.zeros(5, 1))


def _lambda_return_loop(gamma_k, lmbda, nv, r, done, term, k):
    """TD(lambda) return from step k with the constant discount gamma_k (plain loop, 1-D)."""
    g = None
    for i in reversed(range(k, r.shape[0])):
        cut = bool(done[i]) or i == r.shape[0] - 1
        nxt = nv[i] if cut else (1 - lmbda) * nv[i] + lmbda * g
        g = r[i] + gamma_k * (1.0 - float(term[i])) * nxt
    return g


@pytest.mark.parametrize("lmbda", [1.0, 0.6])
def test_rolling_gamma_false_discounts_each_start_with_its_own_gamma(lmbda):
    torch.manual_seed(0)
    t = 7
    r, nv, gamma = torch.randn(t, 1), torch.randn(t, 1), torch.rand(t, 1)
    done = torch.zeros(t, 1, dtype=torch.bool)
    done[3] = True
    term = torch.zeros(t, 1, dtype=torch.bool)
    term[5] = True
    if lmbda == 1.0:
        got = F.td1_return_estimate(gamma, nv, r, done | term, term, rolling_gamma=False)
    else:
        got = F.td_lambda_return_estimate(gamma, lmbda, nv, r, done | term, term, False)
    d = done | term
    ref = torch.stack(
        [
            _lambda_return_loop(gamma[k, 0], lmbda, nv[:, 0], r[:, 0], d[:, 0], term[:, 0], k)
            for k in range(t)
        ]
    )
    torch.testing.assert_close(got.squeeze(-1), ref)
    # the default (rolling) reading ties gamma[i] to step i instead
    rolling = F.vec_td1_return_estimate(gamma, nv, r, d, term, rolling_gamma=True)
    torch.testing.assert_close(rolling, F.td1_return_estimate(gamma, nv, r, d, term))
    adv = F.td1_advantage_estimate(gamma, nv, nv, r, d, term, False)
    torch.testing.assert_close(adv, F.td1_return_estimate(gamma, nv, r, d, term, False) - nv)
    with pytest.raises(RuntimeError, match="time-sensitive gamma"):
        F.td1_return_estimate(0.9, nv, r, d, term, rolling_gamma=False)
