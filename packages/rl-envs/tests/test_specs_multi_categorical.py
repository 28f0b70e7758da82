"""MultiCategorical: one categorical per entry of the last dim."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_envs.specs import Categorical, MultiCategorical


def test_construction_and_nvec():
    spec = MultiCategorical([3, 2])
    assert spec.shape == torch.Size([2]) and spec.dtype == torch.int64
    assert spec.nvec.tolist() == [3, 2] and isinstance(spec, Categorical)
    batched = MultiCategorical([3, 2], shape=(4, 2))
    assert batched.nvec.shape == torch.Size([4, 2])
    with pytest.raises(ValueError, match="broadcast"):
        MultiCategorical([3, 2], shape=(4, 3))
    with pytest.raises(ValueError, match=">= 1"):
        MultiCategorical([3, 0])


def test_rand_covers_each_range():
    torch.manual_seed(0)
    x = MultiCategorical([4, 2, 1]).rand((3000,))
    assert MultiCategorical([4, 2, 1]).is_in(x)
    assert set(x[:, 0].tolist()) == {0, 1, 2, 3}
    assert set(x[:, 1].tolist()) == {0, 1} and set(x[:, 2].tolist()) == {0}
    assert torch.bincount(x[:, 0]).tolist() == pytest.approx([750] * 4, abs=100)


def test_same_nvec_fast_path():
    x = MultiCategorical([3, 3, 3]).rand((200,))
    assert set(x.reshape(-1).tolist()) == {0, 1, 2}


def test_is_in():
    spec = MultiCategorical([3, 2])
    assert spec.is_in(torch.tensor([[2, 1], [0, 0]]))
    assert not spec.is_in(torch.tensor([2, 2]))
    assert not spec.is_in(torch.tensor([-1, 0]))
    assert "nvec=[3, 2]" in spec.explain(torch.tensor([2, 2]))


@settings(max_examples=50, deadline=None)
@given(
    nvec=st.lists(st.integers(1, 6), min_size=3, max_size=3),
    xs=st.lists(st.floats(-10, 10, allow_nan=False), min_size=3, max_size=3),
)
def test_project_rounds_and_clips_per_entry(nvec, xs):
    spec = MultiCategorical(nvec)
    out = spec.project(torch.tensor(xs))
    assert spec.is_in(out)
    assert out.tolist() == [min(max(round(x), 0), n - 1) for x, n in zip(xs, nvec, strict=True)]


def test_encode_from_multidiscrete_numpy():
    out = MultiCategorical([3, 2]).encode(np.array([2, 1]))
    assert out.dtype == torch.int64 and out.tolist() == [2, 1]


def test_equality_and_expand():
    assert MultiCategorical([3, 2]) == MultiCategorical([3, 2])
    assert MultiCategorical([3, 2]) != MultiCategorical([2, 3])
    big = MultiCategorical([3, 2]).expand(5, 2)
    assert big.nvec.tolist() == [[3, 2]] * 5 and big[0] == MultiCategorical([3, 2])
    assert "nvec=[3, 2]" in repr(big)


def test_mask_not_supported():
    with pytest.raises(NotImplementedError):
        MultiCategorical([3, 2]).update_mask(None)
