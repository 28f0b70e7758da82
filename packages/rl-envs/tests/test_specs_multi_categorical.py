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


MASK = torch.tensor([[True, False, True, False, True], [False, True, False, True, False]])


def test_mask_rand_samples_only_allowed_categories():
    torch.manual_seed(0)
    spec = MultiCategorical([3, 2], shape=(2, 2), mask=MASK)
    x = spec.rand((500,))
    assert set(x[:, 0, 0].tolist()) == {0, 2} and set(x[:, 0, 1].tolist()) == {1}
    assert set(x[:, 1, 0].tolist()) == {1} and set(x[:, 1, 1].tolist()) == {0}
    assert spec.is_in(x)


def test_mask_is_in_and_project():
    spec = MultiCategorical([3, 2], mask=MASK[0])
    assert spec.is_in(torch.tensor([2, 1]))
    assert not spec.is_in(torch.tensor([1, 1]))  # 1 is masked in the first group
    assert "allowed by the mask" in spec.explain(torch.tensor([1, 1]))
    # nearest allowed category per group, ties to the lower one
    assert spec.project(torch.tensor([1, 0])).tolist() == [0, 1]
    spec.update_mask(None)
    assert spec.mask is None and spec.is_in(torch.tensor([1, 0]))


def test_mask_kept_by_shape_ops_and_equality():
    spec = MultiCategorical([3, 2], shape=(2, 2), mask=MASK)
    assert spec.clone() == spec and spec.unsqueeze(0).squeeze(0) == spec
    assert torch.equal(spec[1].mask, MASK[1])
    assert spec.expand(4, 2, 2).mask.shape == (4, 2, 5)
    assert torch.equal(spec.to_one_hot_spec().mask, MASK)
    other = spec.clone()
    other.update_mask(~MASK)
    assert other != spec and MultiCategorical([3, 2], shape=(2, 2)) != spec


def test_mask_errors():
    with pytest.raises(ValueError, match="sum\\(nvec\\)=5"):
        MultiCategorical([3, 2], mask=torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="every group"):
        MultiCategorical([3, 2], mask=torch.tensor([True, True, True, False, False]))
    with pytest.raises(ValueError, match="same nvec"):
        MultiCategorical(torch.tensor([[3, 2], [2, 3]]), mask=torch.ones(2, 5, dtype=torch.bool))
