"""Spec conversions and behaviours from TorchRL: one-hot <-> categorical, memoized encode,
``None`` entries in Composite, ``Binary(...).unsqueeze(-1)``."""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDict

from rl_envs import Binary, Categorical, Composite, MultiCategorical, MultiOneHot, OneHot, Unbounded


def test_categorical_to_one_hot_and_back() -> None:
    mask = torch.tensor([[True, False, True], [False, True, True]])
    cat = Categorical(3, shape=(2,), mask=mask)
    oh = cat.to_one_hot_spec()
    assert type(oh) is OneHot and oh.shape == (2, 3) and torch.equal(oh.mask, mask)
    back = oh.to_categorical_spec()
    assert back == cat
    idx = torch.tensor([2, 1])
    assert torch.equal(cat.to_one_hot(idx), torch.tensor([[0, 0, 1], [0, 1, 0]]).bool())
    assert torch.equal(oh.to_categorical(cat.to_one_hot(idx)), idx)
    assert cat.to_categorical_spec() is cat and oh.to_one_hot_spec() is oh


def test_multi_categorical_to_multi_one_hot_and_back() -> None:
    mc = MultiCategorical([2, 3], shape=(4, 2))
    moh = mc.to_one_hot_spec()
    assert type(moh) is MultiOneHot and moh.shape == (4, 5) and moh.nvec == [2, 3]
    assert moh.to_categorical_spec() == mc
    val = torch.tensor([[1, 2]])
    hot = mc.to_one_hot(val)
    assert hot.tolist() == [[False, True, False, False, True]]
    assert torch.equal(moh.to_categorical(hot), val)


def test_memoize_encode_matches_eager_and_can_be_erased() -> None:
    spec = Unbounded(shape=(1,))
    eager = [spec.encode(np.float64(v)) for v in (0.5, 1.5)]
    spec.memoize_encode()
    memo = [spec.encode(np.float64(v)) for v in (0.5, 1.5)]
    assert all(torch.equal(a, b) for a, b in zip(eager, memo, strict=True))
    assert len(spec._encode_memo) == 1
    assert torch.equal(spec.encode(np.array([3.0])), torch.tensor([3.0]))
    spec.erase_memoize_cache()
    assert spec._encode_memo == {}
    spec.memoize_encode(False)
    assert spec._encode_memo is None
    comp = Composite(a=Unbounded(shape=(2,)), b=None)
    comp.memoize_encode()
    assert comp["a"]._encode_memo == {}


def test_composite_none_entries() -> None:
    spec = Composite(obs=Unbounded(shape=(2,)), new=None)
    assert spec.keys() == ["obs", "new"] and spec["new"] is None and "new" in spec
    td = spec.zero()
    assert list(td.keys()) == ["obs"]
    assert spec.is_in(td) and spec.explain(td) is None
    assert spec.expand(3).rand().batch_size == (3,)
    other = Composite(obs=Unbounded(shape=(2,)), act=Unbounded(shape=(1,)))
    other.update(Composite(act=None))
    assert other["act"] is None
    spec["nested", "leaf"] = None
    assert spec["nested", "leaf"] is None
    assert spec.clone() == spec
    assert spec.project(TensorDict(obs=torch.ones(2))).get("obs").shape == (2,)


def test_binary_unsqueeze_last_dim() -> None:
    spec = Binary(n=4, shape=(4,))
    out = spec.unsqueeze(-1)
    assert out.shape == (4, 1) and out.is_in(spec.rand().unsqueeze(-1))
    assert out.squeeze(-1) == spec
    assert spec.unsqueeze(0).shape == (1, 4)


def test_type_check_and_clear_device() -> None:
    import pytest

    spec = Composite(obs=Unbounded(shape=(2,)), n=Categorical(3), device="cpu")
    td = spec.rand()
    spec.type_check(td)
    spec.type_check(td["n"], "n")
    with pytest.raises(TypeError, match=r"'obs'.*torch.float32"):
        spec.type_check(td.set("obs", torch.zeros(2, dtype=torch.float64)))
    assert spec["obs"].clear_device_() is spec["obs"]
    nested = Composite(inner=Composite(x=Unbounded(shape=(1,)), device="cpu"), device="cpu")
    assert nested.clear_device_() is nested
    assert nested.device is None and nested["inner"].device is None


def test_cardinality_matches_counts() -> None:
    from rl_envs import Bounded, Choice

    assert Categorical(5).cardinality() == 5 and OneHot(4).cardinality() == 4
    assert int(MultiOneHot([2, 3]).cardinality()) == 6
    assert int(MultiCategorical([2, 3, 4]).cardinality()) == 24
    assert Bounded(0.0, 1.0, shape=(1,)).cardinality() == float("inf")
    assert Choice([Categorical(2), Categorical(2)]).cardinality() == 4
    assert Composite(a=Categorical(3), b=OneHot(2), c=None).cardinality() == 6


def test_reserved_keys_and_reset_composite_shape() -> None:
    import pytest

    spec = Composite(obs=Unbounded(shape=(4, 2)), shape=(4,))
    for key in ("shape", "device", "dtype", "space"):
        with pytest.raises(AttributeError, match="cannot be set"):
            spec[key] = Unbounded(shape=(4, 1))
    sub = spec.clone()
    sub.shape = torch.Size(())  # leaves still start with (4,): adopted with the parent's shape
    spec["sub"] = sub
    assert spec["sub"].shape == (4,)


def test_composite_shape_setter_follows_torchrl() -> None:
    import pytest

    spec = Composite(nested=Composite(leaf=Unbounded(shape=(3, 2)), shape=(3,)), shape=(3,))
    spec.shape = ()  # nested entries that start with () keep their shape
    assert spec.shape == () and spec["nested"].shape == (3,)
    spec["nested"].shape = ()
    spec.shape = (3,)  # a nested Composite that does not start with (3,) takes it
    assert spec["nested"].shape == (3,)
    with pytest.raises(ValueError, match="does not start with"):
        spec.shape = (4,)
