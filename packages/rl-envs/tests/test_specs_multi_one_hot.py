"""MultiOneHot: concatenated one-hot groups."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_envs.specs import MultiOneHot, OneHot


def _reference_onehots(indices, nvec):
    out = []
    for i, n in zip(indices, nvec, strict=True):
        out += [1 if j == i else 0 for j in range(n)]
    return out


def test_construction():
    spec = MultiOneHot([2, 3])
    assert spec.shape == torch.Size([5]) and spec.n == 5 and spec.space.nvec == (2, 3)
    assert isinstance(spec, OneHot)
    with pytest.raises(ValueError, match="sum"):
        MultiOneHot([2, 3], shape=(4,))


def test_rand_has_one_hot_per_group():
    spec = MultiOneHot([2, 3, 1], dtype=torch.int64)
    torch.manual_seed(0)
    x = spec.rand((3000,))
    assert spec.is_in(x)
    assert x[:, :2].sum(-1).eq(1).all() and x[:, 2:5].sum(-1).eq(1).all() and x[:, 5].eq(1).all()
    assert x[:, 2:5].sum(0).tolist() == pytest.approx([1000] * 3, abs=120)


@pytest.mark.parametrize(
    "value",
    [[1, 0, 1, 1, 0], [1, 1, 0, 0, 1], [0, 0, 1, 0, 0], [1, 0, 2, 0, 0]],
)
def test_is_in_rejects_bad_groups(value):
    spec = MultiOneHot([2, 3], dtype=torch.int64)
    assert not spec.is_in(torch.tensor(value))


@settings(max_examples=40, deadline=None)
@given(
    nvec=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    data=st.data(),
)
def test_encode_to_numpy_round_trip(nvec, data):
    indices = [data.draw(st.integers(0, n - 1)) for n in nvec]
    spec = MultiOneHot(nvec, dtype=torch.int64)
    out = spec.encode(np.array(indices))
    assert out.tolist() == _reference_onehots(indices, nvec)
    assert spec.to_numpy(out).tolist() == indices


@settings(max_examples=40, deadline=None)
@given(
    xs=st.lists(st.floats(-5, 5, allow_nan=False, width=32), min_size=5, max_size=5, unique=True)
)
def test_project_takes_argmax_per_group(xs):
    spec = MultiOneHot([2, 3], dtype=torch.float32)
    out = spec.project(torch.tensor(xs))
    expected = _reference_onehots([int(np.argmax(xs[:2])), int(np.argmax(xs[2:]))], [2, 3])
    assert spec.is_in(out) and out.tolist() == expected


def test_encode_errors():
    spec = MultiOneHot([2, 3])
    with pytest.raises(ValueError, match="one index per group"):
        spec.encode([1, 0, 0])
    with pytest.raises(ValueError, match="out of range"):
        spec.encode([2, 0])


def test_index_gathers_per_group():
    spec = MultiOneHot([2, 3])
    values = torch.arange(5.0)
    assert spec.index(spec.encode([1, 2]), values).tolist() == [1.0, 4.0]


def test_batched_and_equality():
    spec = MultiOneHot([2, 3], shape=(4, 5))
    x = spec.rand()
    assert x.shape == torch.Size([4, 5]) and spec.is_in(x)
    assert spec[0] == MultiOneHot([2, 3]) and spec != MultiOneHot([3, 2], shape=(4, 5))


def test_mask_rand_is_in_project():
    torch.manual_seed(0)
    mask = torch.tensor([True, False, False, True, True])
    spec = MultiOneHot([2, 3], mask=mask)
    x = spec.rand((300,))
    assert bool(x[:, 0].all()) and not bool(x[:, 1:3].any())
    assert set(spec.to_numpy(x)[:, 1].tolist()) == {1, 2}
    assert spec.is_in(x)
    assert not spec.is_in(spec.encode([1, 1]))  # group 0's category 1 is masked
    # argmax among the allowed categories of each group
    out = spec.project(torch.tensor([0.1, 0.9, 0.8, 0.2, 0.3]))
    assert out.tolist() == [True, False, False, False, True]
    spec.update_mask(None)
    assert spec.mask is None and spec.is_in(spec.encode([1, 1]))


def test_mask_kept_by_shape_ops_and_conversion():
    mask = torch.tensor([[True, False, True, True, False], [False, True, False, False, True]])
    spec = MultiOneHot([2, 3], shape=(2, 5), mask=mask)
    assert spec.clone() == spec and spec.unsqueeze(0).squeeze(0) == spec
    assert torch.equal(spec[0].mask, mask[0])
    assert torch.equal(spec.to_categorical_spec().mask, mask)
    other = spec.clone()
    other.update_mask(~mask)
    assert other != spec


def test_mask_errors():
    with pytest.raises(ValueError, match="broadcast"):
        MultiOneHot([2, 3], mask=torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="every group"):
        MultiOneHot([2, 3], mask=torch.tensor([False, False, True, True, True]))
