"""Bounded (continuous and discrete) against closed-form expectations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_envs.specs import Bounded

finite = st.floats(-1e4, 1e4, allow_nan=False, width=32)


def test_space_low_high_are_expanded_tensors():
    spec = Bounded(-1.0, torch.tensor([1.0, 2.0, 3.0]))
    assert spec.shape == torch.Size([3])
    assert torch.equal(spec.space.low, torch.full((3,), -1.0))
    assert torch.equal(spec.high, torch.tensor([1.0, 2.0, 3.0]))
    low, high = spec.space
    assert low is spec.low and high is spec.high
    assert spec.domain == "continuous" and spec.dtype == torch.float32


def test_discrete_domain_and_dtype():
    assert Bounded(0, 3, shape=(2,), domain="discrete").dtype == torch.int64
    spec = Bounded(0, 3, shape=(2,), dtype=torch.int32)
    assert spec.domain == "discrete"
    assert spec.space.low.dtype == torch.int32


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"low": 1.0, "high": 0.0, "shape": (2,)}, "low must be <= high"),
        ({"low": torch.zeros(3), "high": torch.ones(2)}, "broadcast"),
        ({"low": 0, "high": float("inf"), "shape": (1,), "dtype": torch.int64}, "finite bounds"),
        ({"low": 0.0, "high": 1.0, "domain": "weird"}, "domain"),
    ],
)
def test_bad_construction_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Bounded(**kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_rand_uniform_within_bounds_and_covers_them(dtype):
    spec = Bounded(torch.tensor([-1.0, 10.0]), torch.tensor([1.0, 20.0]), dtype=dtype)
    torch.manual_seed(0)
    x = spec.rand((20000,))
    assert spec.is_in(x)
    mean = x.double().mean(0)
    # uniform mean (low + high) / 2, std of the mean (high - low) / sqrt(12 n)
    assert torch.allclose(mean, torch.tensor([0.0, 15.0], dtype=torch.float64), atol=0.1)
    assert float(x[:, 0].min()) < -0.99 and float(x[:, 1].max()) > 19.9


def test_rand_scalar_bounds_fast_path_matches_distribution():
    spec = Bounded(2.0, 4.0, shape=(3,))
    torch.manual_seed(1)
    x = spec.rand((10000,))
    assert spec.is_in(x)
    assert abs(float(x.mean()) - 3.0) < 0.02
    assert abs(float(x.var()) - 4.0 / 12) < 0.01


def test_rand_infinite_bounds():
    spec = Bounded(
        torch.tensor([-math.inf, 0.0, -math.inf, -1.0]),
        torch.tensor([0.0, math.inf, math.inf, 1.0]),
    )
    torch.manual_seed(0)
    x = spec.rand((5000,))
    assert torch.isfinite(x).all() and spec.is_in(x)
    assert float(x[:, 0].max()) <= 0.0 and float(x[:, 1].min()) >= 0.0
    assert float(x[:, 2].min()) < 0.0 < float(x[:, 2].max())


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_discrete_rand_covers_every_integer_uniformly(dtype):
    spec = Bounded(torch.tensor([0, 3]), torch.tensor([4, 5]), dtype=dtype)
    torch.manual_seed(0)
    x = spec.rand((6000,))
    assert x.dtype == dtype and spec.is_in(x)
    counts0 = torch.bincount(x[:, 0].long(), minlength=5)
    assert counts0.tolist()[:5] == pytest.approx([1200] * 5, abs=150)
    assert set(x[:, 1].tolist()) == {3, 4, 5}


def test_discrete_scalar_bounds_rand_inclusive():
    spec = Bounded(-2, 2, shape=(1000,), dtype=torch.int64)
    x = spec.rand()
    assert set(x.tolist()) == {-2, -1, 0, 1, 2}


def test_is_in_range_and_nan():
    spec = Bounded(torch.tensor([0.0, -1.0]), torch.tensor([1.0, 1.0]))
    assert spec.is_in(torch.tensor([1.0, -1.0]))  # bounds are inclusive
    assert not spec.is_in(torch.tensor([1.0001, 0.0]))
    assert not spec.is_in(torch.tensor([0.5, float("nan")]))
    assert "value[0] = " in spec.explain(torch.tensor([2.0, 0.0]))
    assert "[0.0, 1.0]" in spec.explain(torch.tensor([2.0, 0.0]))


@settings(max_examples=60, deadline=None)
@given(
    lows=st.lists(finite, min_size=3, max_size=3),
    widths=st.lists(st.floats(0, 1e3, width=32), min_size=3, max_size=3),
    xs=st.lists(st.floats(-1e5, 1e5, allow_nan=False, width=32), min_size=6, max_size=6),
)
def test_project_is_the_nearest_point_in_the_box(lows, widths, xs):
    low = torch.tensor(lows)
    high = low + torch.tensor(widths)
    spec = Bounded(low, high)
    val = torch.tensor(xs).reshape(2, 3)
    out = spec.project(val)
    assert spec.is_in(out)
    for i in range(2):
        for j in range(3):
            lo, hi, x = float(spec.low[j]), float(spec.high[j]), float(val[i, j])
            assert float(out[i, j]) == min(max(x, lo), hi)


@settings(max_examples=60, deadline=None)
@given(
    lo=st.integers(-50, 50),
    width=st.integers(0, 20),
    xs=st.lists(st.floats(-100, 100, allow_nan=False), min_size=4, max_size=4),
)
def test_discrete_project_rounds_then_clips(lo, width, xs):
    spec = Bounded(lo, lo + width, shape=(4,), dtype=torch.int64)
    out = spec.project(torch.tensor(xs, dtype=torch.float64))
    assert spec.is_in(out)
    expected = [min(max(round(x), lo), lo + width) for x in xs]
    # torch.round rounds half to even, like python's round
    assert out.tolist() == expected


def test_project_casts_dtype():
    spec = Bounded(0.0, 1.0, shape=(2,))
    out = spec.project(torch.tensor([2.0, 0.5], dtype=torch.float64))
    assert out.dtype == torch.float32 and out.tolist() == [1.0, 0.5]


def test_encode_from_numpy_and_numbers():
    spec = Bounded(-1.0, 1.0, shape=(3,))
    arr = np.array([0.1, 0.2, 0.3], dtype=np.float64)
    out = spec.encode(arr)
    assert out.dtype == torch.float32 and torch.allclose(out, torch.tensor([0.1, 0.2, 0.3]))
    arr[0] = 5.0  # the tensor does not alias the numpy buffer
    assert float(out[0]) == pytest.approx(0.1)
    ro = np.zeros(3, dtype=np.float32)
    ro.setflags(write=False)
    assert torch.equal(spec.encode(ro), torch.zeros(3))
    assert Bounded(-1.0, 1.0, shape=(1,)).encode(0.5).tolist() == [0.5]
    # TorchRL's rule: non-tensor inputs are reshaped to the spec's shape ...
    assert spec.encode([[0.0, 0.0, 0.0]]).shape == torch.Size([3])
    with pytest.raises(ValueError, match="Shape mismatch"):
        spec.encode(np.zeros(4))
    with pytest.raises(RuntimeError, match="Shape mismatch"):  # (TorchRL raises RuntimeError)
        spec.encode(np.zeros((2, 3)))
    # ... while a tensor may carry leading batch dims; a batched spec encodes a batch
    assert spec.encode(torch.zeros(2, 3)).shape == torch.Size([2, 3])
    assert spec.expand(2, 3).encode(np.zeros((2, 3))).shape == torch.Size([2, 3])


def test_equality_compares_bounds():
    assert Bounded(0.0, 1.0, shape=(2,)) == Bounded(torch.zeros(2), torch.ones(2))
    assert Bounded(0.0, 1.0, shape=(2,)) != Bounded(0.0, 2.0, shape=(2,))
    assert Bounded(0.0, 1.0, shape=(2,)) != Bounded(0, 1, shape=(2,), dtype=torch.int64)


def test_expand_and_index_carry_bounds():
    spec = Bounded(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 3.0]))
    big = spec.expand(4, 2)
    assert torch.equal(big.high, torch.tensor([[1.0, 3.0]] * 4))
    assert torch.equal(big[1].high, spec.high)
    assert torch.equal(spec[1:].low, torch.tensor([1.0]))


def test_repr_shows_bounds():
    text = repr(Bounded(-1.0, 1.0, shape=(2,)))
    assert "ContinuousBox" in text and "value=-1.0" in text and "value=1.0" in text
