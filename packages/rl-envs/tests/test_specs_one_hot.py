"""OneHot: one-hot vectors, encode from indices, project to the argmax."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_envs.specs import OneHot


def test_defaults_and_shape_check():
    spec = OneHot(4)
    assert spec.shape == torch.Size([4]) and spec.dtype == torch.bool and spec.n == 4
    with pytest.raises(ValueError, match="last dim"):
        OneHot(4, shape=(2, 3))


@pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.float32, torch.uint8])
def test_rand_is_one_hot_and_uniform(dtype):
    spec = OneHot(3, shape=(2, 3), dtype=dtype)
    torch.manual_seed(0)
    x = spec.rand((3000,))
    assert x.dtype == dtype and spec.is_in(x)
    assert (x.long().sum(-1) == 1).all()
    counts = x.long().sum((0, 1)).tolist()
    assert counts == pytest.approx([2000] * 3, abs=200)


@pytest.mark.parametrize(
    "value",
    [[0, 0, 0], [1, 1, 0], [2, 0, 0], [-1, 1, 1]],
)
def test_is_in_rejects_non_one_hot(value):
    spec = OneHot(3, dtype=torch.int64)
    assert not spec.is_in(torch.tensor(value))
    assert spec.explain(torch.tensor(value)) is not None


def test_is_in_bool():
    spec = OneHot(3)
    assert spec.is_in(torch.tensor([False, True, False]))
    assert not spec.is_in(torch.tensor([True, True, False]))


@settings(max_examples=50, deadline=None)
@given(
    xs=st.lists(st.floats(-10, 10, allow_nan=False, width=32), min_size=5, max_size=5, unique=True)
)
def test_project_is_the_nearest_one_hot(xs):
    spec = OneHot(5, dtype=torch.float32)
    val = torch.tensor(xs)
    out = spec.project(val)
    assert spec.is_in(out)
    # closed form: the nearest one-hot e_i in L2 maximises x_i
    dists = [sum((x - (1.0 if j == i else 0.0)) ** 2 for j, x in enumerate(xs)) for i in range(5)]
    assert dists[int(out.argmax())] <= min(dists) + 1e-6


def test_encode_takes_indices():
    spec = OneHot(4, shape=(2, 4))
    out = spec.encode(np.array([3, 0]))
    assert out.tolist() == [[False, False, False, True], [True, False, False, False]]
    assert OneHot(3).encode(np.int64(1)).tolist() == [False, True, False]
    with pytest.raises(ValueError, match="indices"):
        OneHot(3).encode(3)


def test_to_numpy_returns_indices():
    spec = OneHot(4, shape=(2, 4))
    arr = spec.to_numpy(spec.encode([2, 1]))
    assert isinstance(arr, np.ndarray) and arr.tolist() == [2, 1]


def test_mask():
    spec = OneHot(3, mask=torch.tensor([False, True, True]))
    torch.manual_seed(0)
    x = spec.rand((300,))
    assert x[:, 0].sum() == 0 and spec.is_in(x)
    assert not spec.is_in(torch.tensor([True, False, False]))
    assert spec.project(torch.tensor([5.0, 1.0, 2.0])).tolist() == [False, False, True]
    spec.update_mask(torch.tensor([True, False, False]))
    assert spec.rand().tolist() == [True, False, False]


def test_index_and_enumerate():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    spec = OneHot(3, shape=(2, 3))
    assert spec.index(spec.encode([1, 2]), values).tolist() == [[2.0], [6.0]]
    all_values = OneHot(3).enumerate()
    assert torch.equal(all_values, torch.eye(3, dtype=torch.bool))


def test_equality_includes_n_and_mask():
    assert OneHot(3) == OneHot(3) and OneHot(3) != OneHot(4)
    assert OneHot(3) != OneHot(3, mask=torch.tensor([True, False, True]))
