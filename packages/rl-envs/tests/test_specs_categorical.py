"""Categorical: indices 0..n-1, with and without a mask."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_envs.specs import Categorical


def test_defaults():
    spec = Categorical(4)
    assert spec.shape == torch.Size([]) and spec.dtype == torch.int64
    assert spec.n == spec.space.n == 4 and spec.domain == "discrete"


def test_bad_n():
    with pytest.raises(ValueError, match="n >= 1"):
        Categorical(0)


def test_rand_is_uniform_over_categories():
    torch.manual_seed(0)
    x = Categorical(5, shape=(2,)).rand((5000,))
    counts = torch.bincount(x.reshape(-1), minlength=5).tolist()
    assert counts == pytest.approx([2000] * 5, abs=200)


def test_is_in_bounds():
    spec = Categorical(3, shape=(2,))
    assert spec.is_in(torch.tensor([0, 2]))
    assert not spec.is_in(torch.tensor([0, 3]))
    assert not spec.is_in(torch.tensor([-1, 0]))
    assert not spec.is_in(torch.tensor([0, 1], dtype=torch.int32))
    assert "[0, 2]" in spec.explain(torch.tensor([0, 3]))


@settings(max_examples=50, deadline=None)
@given(
    n=st.integers(1, 10), xs=st.lists(st.floats(-20, 20, allow_nan=False), min_size=3, max_size=3)
)
def test_project_rounds_and_clips(n, xs):
    spec = Categorical(n, shape=(3,))
    out = spec.project(torch.tensor(xs))
    assert spec.is_in(out)
    assert out.tolist() == [min(max(round(x), 0), n - 1) for x in xs]


def test_encode():
    spec = Categorical(4)
    out = spec.encode(np.int64(3))
    assert out.dtype == torch.int64 and out.shape == torch.Size([]) and int(out) == 3
    assert Categorical(4, shape=(1,)).encode(2).tolist() == [2]
    assert Categorical(4, shape=(2,)).encode(np.array([1, 3])).tolist() == [1, 3]


def test_bool_dtype_categorical():
    spec = Categorical(2, shape=(3, 1), dtype=torch.bool)
    x = spec.rand()
    assert x.dtype == torch.bool and spec.is_in(x)
    assert spec.project(torch.tensor([[0.2], [0.9], [5.0]])).tolist() == [[False], [True], [True]]


def test_mask_restricts_rand_is_in_project():
    mask = torch.tensor([[True, False, True, False], [False, False, False, True]])
    spec = Categorical(4, shape=(2,), mask=mask)
    torch.manual_seed(0)
    x = spec.rand((500,))
    assert set(x[:, 0].tolist()) == {0, 2} and set(x[:, 1].tolist()) == {3}
    assert spec.is_in(x)
    assert not spec.is_in(torch.tensor([1, 3]))
    assert "mask" in spec.explain(torch.tensor([1, 3]))
    # nearest allowed category; ties go to the lower index
    assert spec.project(torch.tensor([1, 0])).tolist() == [0, 3]
    assert spec.project(torch.tensor([3, 2])).tolist() == [2, 3]
    spec.update_mask(None)
    assert spec.is_in(torch.tensor([1, 3]))


def test_mask_validation():
    with pytest.raises(ValueError, match="broadcast"):
        Categorical(4, shape=(2,), mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="at least one"):
        Categorical(2, mask=torch.tensor([False, False]))


def test_mask_equality_and_index():
    a = Categorical(3, mask=torch.tensor([True, True, False]))
    assert a == a.clone() and a != Categorical(3)
    assert a[None].mask.shape == torch.Size([1, 3]) if a.ndim else True
    batched = Categorical(
        3, shape=(2,), mask=torch.tensor([[True, False, True], [False, True, True]])
    )
    assert torch.equal(batched[1].mask, torch.tensor([False, True, True]))
    assert batched.expand(4, 2).mask.shape == torch.Size([4, 2, 3])


def test_index_gathers_chosen_value():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    out = Categorical(3, shape=(2,)).index(torch.tensor([2, 0]), values)
    assert out.tolist() == [[3.0], [4.0]]


def test_enumerate():
    out = Categorical(3, shape=(2,)).enumerate()
    assert out.shape == torch.Size([3, 2]) and out[:, 0].tolist() == [0, 1, 2]
