"""consolidate_spec: exclusive keys of lazily stacked Composites become empty entries."""

from __future__ import annotations

import pytest
import torch

from rl_envs import check_no_exclusive_keys, consolidate_spec
from rl_envs.specs import Bounded, Composite, StackedComposite, Unbounded


def agents():
    a = Composite(obs=Unbounded(shape=(3,)), lidar=Bounded(0.0, 5.0, shape=(8,)))
    b = Composite(obs=Unbounded(shape=(2,)), lidar=Bounded(0.0, 5.0, shape=(8,)),
                  t1=Unbounded(shape=(1, 2)))  # fmt: skip
    c = Composite(obs=Unbounded(shape=(2,)), t2=Unbounded(shape=(1, 2, 3)))
    return torch.stack([a, b, c])


def test_every_member_gets_every_key_as_an_empty_entry():
    spec = agents()
    assert sorted(spec.keys()) == ["obs"]
    out = consolidate_spec(spec)
    assert isinstance(out, StackedComposite)
    assert sorted(out.keys()) == ["lidar", "obs", "t1", "t2"]
    # the key's own shape where every member that has it agrees, 0 in its trailing dims
    # for the members that lack it (they hold no data)
    assert out[2]["lidar"].shape == (0,)
    assert out[0]["t1"].shape == (0, 0) and out[2]["t1"].shape == (0, 0)
    assert out[0]["t2"].shape == (0, 0, 0)
    assert out[1]["obs"].shape == (2,)  # shared keys untouched
    td = out.zero()
    assert td[0]["t2"].numel() == 0 and td[1]["t1"].shape == (1, 2)
    assert sorted(spec.keys()) == ["obs"]  # the input is not modified


def test_other_specs_come_back_as_copies():
    leaf = Unbounded(shape=(2,))
    dense = Composite(x=leaf)
    assert consolidate_spec(leaf) == leaf and consolidate_spec(dense) == dense
    assert consolidate_spec(dense) is not dense


def test_error_exclusive_key_of_two_classes():
    a = Composite(x=Unbounded(shape=(1,)))
    b = Composite(x=Bounded(0.0, 1.0, shape=(1,)))
    spec = torch.stack([a, b, Composite()])
    with pytest.raises(ValueError, match="different classes"):
        consolidate_spec(spec)


def test_check_no_exclusive_keys():
    spec = agents()
    assert not check_no_exclusive_keys(spec)
    assert check_no_exclusive_keys(consolidate_spec(spec))
    # a lazy stack nested in a Composite entry: seen only with recurse
    outer = Composite(agents=spec, shape=(3,))
    assert not check_no_exclusive_keys(outer)
    assert check_no_exclusive_keys(outer, recurse=False)
    assert check_no_exclusive_keys(Unbounded(shape=(2,)))
