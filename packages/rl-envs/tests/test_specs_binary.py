"""Binary: vectors of independent 0/1 entries."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_envs.specs import Binary, Categorical


def test_construction():
    assert Binary(3).shape == torch.Size([3]) and Binary(3).dtype == torch.int8
    assert Binary(shape=(2, 4)).shape == torch.Size([2, 4])
    assert isinstance(Binary(3), Categorical) and Binary(3).space.n == 2
    with pytest.raises(ValueError, match="shape"):
        Binary(3, shape=(2, 4))
    with pytest.raises(TypeError):
        Binary()


def test_rand_fair_coins():
    torch.manual_seed(0)
    x = Binary(4).rand((5000,))
    assert set(x.unique().tolist()) == {0, 1}
    assert abs(float(x.float().mean()) - 0.5) < 0.02


@pytest.mark.parametrize("dtype", [torch.int8, torch.bool, torch.float32])
def test_is_in(dtype):
    spec = Binary(3, dtype=dtype)
    assert spec.is_in(torch.tensor([1, 0, 1]).to(dtype))
    if dtype != torch.bool:
        assert not spec.is_in(torch.tensor([2, 0, 1]).to(dtype))


@settings(max_examples=50, deadline=None)
@given(xs=st.lists(st.floats(-5, 5, allow_nan=False, width=32), min_size=4, max_size=4))
def test_project_nearest_binary_vector(xs):
    spec = Binary(4)
    out = spec.project(torch.tensor(xs))
    assert spec.is_in(out)
    assert out.tolist() == [1 if x > 0.5 else 0 for x in xs]


def test_encode_from_numpy_multibinary():
    out = Binary(3).encode(np.array([1, 0, 1], dtype=np.int8))
    assert out.dtype == torch.int8 and out.tolist() == [1, 0, 1]


def test_mask_not_supported():
    with pytest.raises(TypeError):
        Binary(3).update_mask(torch.ones(3, 2, dtype=torch.bool))
