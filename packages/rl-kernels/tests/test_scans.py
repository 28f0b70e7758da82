"""The scans (Triton interpreted and torch) against plain-Python loop references."""

from __future__ import annotations

import kernels_scan_reference as ref
import pytest
import torch
from kernels_test_backends import BACKENDS, needs_triton

from rl_kernels import scans

BATCHES = [(), (4,), (2, 3)]
GAMMA, LMBDA = 0.9, 0.8


def _data(batch, steps, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    shape = (*batch, steps, 1)

    def rand(scale=1.0):
        return (torch.randn(shape, generator=gen) * scale).to(dtype)

    done = torch.rand(shape, generator=gen) < 0.25
    flat = done.view(-1, steps)
    flat[0, 0] = True  # an episode end at t=0 ...
    flat[-1, -1] = True  # ... and at the last step
    terminated = done & (torch.rand(shape, generator=gen) < 0.5)
    terminated.view(-1, steps)[0, 0] = True
    return {
        "value": rand(),
        "next_value": rand(),
        "reward": rand(),
        "log_pi": rand(0.5),
        "log_mu": rand(0.5),
        "done": done,
        "terminated": terminated,
    }


def _run(name, d, backend):
    if name == "gae":
        args = (GAMMA, LMBDA, d["value"], d["next_value"], d["reward"], d["done"])
        return scans.generalized_advantage_estimate(*args, d["terminated"], backend=backend)
    if name == "td_lambda":
        args = (GAMMA, LMBDA, d["next_value"], d["reward"], d["done"], d["terminated"])
        return (scans.td_lambda_return_estimate(*args, backend=backend),)
    if name == "vtrace":
        args = (GAMMA, d["log_pi"], d["log_mu"], d["value"], d["next_value"], d["reward"])
        return scans.vtrace_advantage_estimate(
            *args, d["done"], d["terminated"], 1.0, 0.8, backend=backend
        )
    return (scans.reward2go(d["reward"], d["done"], GAMMA, backend=backend),)


def _reference(name, d):
    if name == "gae":
        keys = ("value", "next_value", "reward", "done", "terminated")
        return ref.gae(GAMMA, LMBDA, *(d[k] for k in keys))
    if name == "td_lambda":
        keys = ("next_value", "reward", "done", "terminated")
        return (ref.td_lambda(GAMMA, LMBDA, *(d[k] for k in keys)),)
    if name == "vtrace":
        keys = ("log_pi", "log_mu", "value", "next_value", "reward", "done", "terminated")
        return ref.vtrace(GAMMA, *(d[k] for k in keys), 1.0, 0.8)
    return (ref.reward_to_go(d["reward"], d["done"], GAMMA),)


NAMES = ["gae", "td_lambda", "vtrace", "reward2go"]


def _tol(dtype):
    return (
        {"atol": 1e-12, "rtol": 1e-10} if dtype == torch.float64 else {"atol": 1e-5, "rtol": 1e-5}
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", NAMES)
def test_scan_matches_loop_reference(name, dtype, batch, backend):
    d = _data(batch, 13, dtype)
    expected = _reference(name, d)
    for out, exp in zip(_run(name, d, backend), expected, strict=True):
        assert out.shape == exp.shape and out.dtype == dtype
        torch.testing.assert_close(out, exp, **_tol(dtype))


@pytest.mark.parametrize(
    ("backend", "batch", "steps"),
    # long rows: several Triton chunks; the torch blocked scan (numel > 32768) with a remainder
    [
        pytest.param("triton", (2,), 1100, marks=needs_triton),
        ("torch", (30,), 1203),
        ("torch", (3,), 40),
    ],
)
@pytest.mark.parametrize("name", NAMES)
def test_long_sequences(name, backend, batch, steps):
    d = _data(batch, steps, torch.float64, seed=1)
    for out, exp in zip(_run(name, d, backend), _reference(name, d), strict=True):
        torch.testing.assert_close(out, exp, atol=1e-10, rtol=1e-10)


@needs_triton
@pytest.mark.parametrize("name", NAMES)
def test_triton_equals_torch(name):
    d = _data((2, 3), 37, torch.float32, seed=2)
    for a, b in zip(_run(name, d, "triton"), _run(name, d, "torch"), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["gae", "td_lambda", "vtrace"])
def test_gradients_match_reference(name, backend):
    d = _data((2,), 9, torch.float64, seed=3)
    floats = ["value", "next_value", "reward", "log_pi", "log_mu"]
    leaves = {k: d[k].clone().requires_grad_(True) for k in floats}
    ref_leaves = {k: d[k].clone().requires_grad_(True) for k in floats}
    weights = torch.randn(d["reward"].shape, dtype=torch.float64)
    out = sum((o * weights).sum() for o in _run(name, {**d, **leaves}, backend))
    exp = sum((o * weights).sum() for o in _reference(name, {**d, **ref_leaves}))
    out.backward()
    exp.backward()
    for k in floats:
        got, want = leaves[k].grad, ref_leaves[k].grad
        if want is None:
            assert got is None or not got.any()
        else:
            torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_discounted_cumsum_gradcheck(backend):
    x = torch.randn(2, 6, 1, dtype=torch.float64, requires_grad=True)
    g = torch.rand(2, 6, 1, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda x, g: scans.discounted_cumsum(x, g, backend=backend), (x, g)
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_discounted_cumsum_tensor_discount_and_done(backend):
    x = torch.randn(3, 10, 1, dtype=torch.float64)
    disc = torch.rand(3, 10, 1, dtype=torch.float64)
    done = torch.rand(3, 10, 1) < 0.3
    expected = torch.zeros_like(x)
    for b in range(3):
        acc = 0.0
        for t in reversed(range(10)):
            acc = x[b, t] + (0.0 if done[b, t] else disc[b, t] * acc)
            expected[b, t] = acc
    out = scans.discounted_cumsum(x, disc, done=done, backend=backend)
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["gae", "vtrace"])
def test_bfloat16_accumulates_in_float32(name, backend):
    d = _data((4,), 16, torch.bfloat16, seed=4)
    as_float = {k: v.float() if v.is_floating_point() else v for k, v in d.items()}
    for out, exp in zip(_run(name, d, backend), _reference(name, as_float), strict=True):
        assert out.dtype == torch.bfloat16
        torch.testing.assert_close(out.float(), exp, atol=0.05, rtol=0.02)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bfloat16_long_sum_is_exact(backend):
    # accumulated in bfloat16 the sum would stall at 256 (1 is below half an ulp there)
    ones = torch.ones(600, 1, dtype=torch.bfloat16)
    out = scans.discounted_cumsum(ones, 1.0, backend=backend)
    assert out.dtype == torch.bfloat16
    assert out[0, 0].item() == 600.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_time_dim_and_non_contiguous_inputs(backend):
    d = _data((3,), 11, torch.float64, seed=5)
    keys = ("value", "next_value", "reward", "done", "terminated")
    expected = scans.generalized_advantage_estimate(GAMMA, LMBDA, *(d[k] for k in keys))
    # time first ([T, B, 1], time_dim=0), stored batch-major: non-contiguous views
    views = [d[k].transpose(0, 1) for k in keys]
    assert not views[0].is_contiguous()
    adv, target = scans.generalized_advantage_estimate(
        GAMMA, LMBDA, *views, time_dim=0, backend=backend
    )
    torch.testing.assert_close(adv, expected[0].transpose(0, 1))
    torch.testing.assert_close(target, expected[1].transpose(0, 1))
    # no feature dim: [B, T] with time_dim=-1
    flat = [d[k].squeeze(-1) for k in keys]
    adv, _ = scans.generalized_advantage_estimate(GAMMA, LMBDA, *flat, time_dim=-1, backend=backend)
    torch.testing.assert_close(adv, expected[0].squeeze(-1))


def test_tensor_gamma_broadcasts():
    d = _data((2,), 8, torch.float64, seed=6)
    keys = ("value", "next_value", "reward", "done", "terminated")
    adv, _ = scans.generalized_advantage_estimate(
        torch.tensor(GAMMA, dtype=torch.float64), LMBDA, *(d[k] for k in keys)
    )
    expected, _ = ref.gae(GAMMA, LMBDA, *(d[k] for k in keys))
    torch.testing.assert_close(adv, expected)
    per_step = torch.full((2, 8, 1), GAMMA, dtype=torch.float64)
    adv, _ = scans.generalized_advantage_estimate(per_step, LMBDA, *(d[k] for k in keys))
    torch.testing.assert_close(adv, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_td_lambda_advantage_and_per_step_gamma(backend):
    d = _data((3,), 10, torch.float64, seed=7)
    keys = ("next_value", "reward", "done", "terminated")
    adv = scans.td_lambda_advantage_estimate(
        GAMMA, LMBDA, d["value"], *(d[k] for k in keys), backend=backend
    )
    expected = ref.td_lambda(GAMMA, LMBDA, *(d[k] for k in keys)) - d["value"]
    torch.testing.assert_close(adv, expected)
    # a per-step gamma tensor (TorchRL's rolling_gamma=True): constant here, so same result
    gamma = torch.full(d["reward"].shape, GAMMA, dtype=torch.float64)
    ret = scans.td_lambda_return_estimate(
        gamma, LMBDA, *(d[k] for k in keys), True, backend=backend
    )
    torch.testing.assert_close(ret, expected + d["value"])
    with pytest.raises(NotImplementedError, match="rolling_gamma=False"):
        scans.td_lambda_return_estimate(gamma, LMBDA, *(d[k] for k in keys), False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_feature_dims_and_contiguous_outputs(backend):
    # [B, T, F] with F = 2 and time first: outputs are contiguous and match per-feature runs
    gen = torch.Generator().manual_seed(8)
    shape = (9, 3, 2)  # [T, B, F], time_dim=0
    v, nv, r = (torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(3))
    done = torch.rand(shape, generator=gen) < 0.3
    adv, target = scans.generalized_advantage_estimate(
        GAMMA, LMBDA, v, nv, r, done, time_dim=0, backend=backend
    )
    assert adv.is_contiguous() and target.is_contiguous()
    for f in range(2):
        sel = [x[..., f].transpose(0, 1).unsqueeze(-1) for x in (v, nv, r, done)]
        expected, _ = ref.gae(GAMMA, LMBDA, *sel, sel[-1])
        torch.testing.assert_close(adv[..., f], expected.squeeze(-1).transpose(0, 1))


@needs_triton
@pytest.mark.parametrize("block", [1, 4, None])
def test_triton_gae_chunk_lengths(block):
    # block=1 is the reverse-loop formulation the benchmark compares with the blocked scan
    from rl_kernels.scans._triton_scan import triton_gae

    d = _data((3,), 37, torch.float64, seed=9)
    rows = {k: v.squeeze(-1).contiguous() for k, v in d.items()}
    keys = ("value", "next_value", "reward", "done", "terminated")
    adv, target = triton_gae(*(rows[k] for k in keys), GAMMA, LMBDA, block=block)
    expected, expected_target = ref.gae(GAMMA, LMBDA, *(d[k] for k in keys))
    torch.testing.assert_close(adv, expected.squeeze(-1))
    torch.testing.assert_close(target, expected_target.squeeze(-1))
    with pytest.raises(ValueError, match="power of two"):
        triton_gae(*(rows[k] for k in keys), GAMMA, LMBDA, block=3)
