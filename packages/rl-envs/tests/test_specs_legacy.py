"""The old TorchRL spec names build the new specs and warn with a DeprecationWarning."""

from __future__ import annotations

import pickle

import pytest
import torch

import rl_envs
from rl_envs import (
    Binary,
    Bounded,
    BoundedContinuous,
    BoundedDiscrete,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    Unbounded,
    UnboundedContinuous,
    UnboundedDiscrete,
)

CASES = {
    "BoundedTensorSpec": (lambda c: c(-1.0, 1.0, shape=(2,)), BoundedContinuous),
    "UnboundedContinuousTensorSpec": (lambda c: c(shape=(3,)), UnboundedContinuous),
    "UnboundedDiscreteTensorSpec": (lambda c: c(shape=(3,)), UnboundedDiscrete),
    "OneHotDiscreteTensorSpec": (lambda c: c(4), OneHot),
    "DiscreteTensorSpec": (lambda c: c(4), Categorical),
    "MultiOneHotDiscreteTensorSpec": (lambda c: c([2, 3]), MultiOneHot),
    "MultiDiscreteTensorSpec": (lambda c: c([2, 3]), MultiCategorical),
    "BinaryDiscreteTensorSpec": (lambda c: c(4), Binary),
    "CompositeSpec": (lambda c: c(obs=Unbounded(shape=(2,))), Composite),
    "NonTensorSpec": (lambda c: c(shape=()), NonTensor),
}


@pytest.mark.parametrize("old", sorted(CASES))
def test_old_name_builds_the_new_spec_and_warns(old: str) -> None:
    build, new_type = CASES[old]
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated"):
        spec = build(getattr(rl_envs, old))
    assert type(spec) is new_type
    parent = Bounded if old == "BoundedTensorSpec" else new_type
    assert issubclass(getattr(rl_envs, old), parent)


def test_bounded_alias_equals_new_spec_and_pickles() -> None:
    with pytest.warns(DeprecationWarning):
        old = rl_envs.BoundedTensorSpec(low=-2.0, high=2.0, shape=torch.Size([1]))
    new = Bounded(low=-2.0, high=2.0, shape=(1,))
    assert old == new
    assert pickle.loads(pickle.dumps(old)) == new
    assert isinstance(old, Bounded)


def test_unbounded_discrete_alias_default_dtype_is_int64() -> None:
    with pytest.warns(DeprecationWarning):
        spec = rl_envs.UnboundedDiscreteTensorSpec(shape=(2,))
    assert spec.dtype == torch.int64


def test_lazy_stacked_aliases_build_lazy_stacks() -> None:
    a, b = Composite(x=Unbounded(shape=(2,))), Composite(x=Unbounded(shape=(3,)))
    with pytest.warns(DeprecationWarning):
        spec = rl_envs.LazyStackedCompositeSpec(a, b, dim=0)
    assert isinstance(spec, rl_envs.StackedComposite)
    with pytest.warns(DeprecationWarning):
        leaf = rl_envs.LazyStackedTensorSpec(Unbounded(shape=(2,)), Unbounded(shape=(3,)), dim=0)
    assert isinstance(leaf, rl_envs.Stacked)


def test_subclass_dispatch_by_dtype() -> None:
    assert type(Unbounded(shape=(2,))) is UnboundedContinuous
    assert type(Unbounded(shape=(2,), dtype=torch.int32)) is UnboundedDiscrete
    assert type(UnboundedContinuous(shape=(2,), dtype=torch.int64)) is UnboundedDiscrete
    assert type(UnboundedDiscrete(shape=(2,), dtype=torch.float32)) is UnboundedContinuous
    assert UnboundedDiscrete(shape=(2,)).dtype == torch.int64
    assert type(Bounded(0, 3, shape=(1,), dtype=torch.int64)) is BoundedDiscrete
    assert type(Bounded(0.0, 3.0, shape=(1,))) is BoundedContinuous
    assert BoundedDiscrete(0, 3, shape=(1,)).dtype == torch.int64
    # shape ops, copies and pickling keep the subclass
    spec = UnboundedDiscrete(shape=(2,))
    assert type(spec.expand(3, 2)) is UnboundedDiscrete
    assert type(spec.to(torch.float32)) is UnboundedContinuous
    assert type(pickle.loads(pickle.dumps(spec))) is UnboundedDiscrete
    assert (
        type(pickle.loads(pickle.dumps(Bounded(0, 3, shape=(1,), dtype=torch.int8))))
        is BoundedDiscrete
    )
