"""``torch.stack`` of specs: dense when equal, lazy (Stacked / StackedComposite) otherwise."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from rl_envs import (
    Bounded,
    Composite,
    Stacked,
    StackedComposite,
    Unbounded,
    UnboundedDiscrete,
)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_stack_of_equal_specs_is_dense(dim: int) -> None:
    spec = UnboundedDiscrete(shape=(3, 4))
    out = torch.stack([spec, spec.clone()], dim)
    assert isinstance(out, UnboundedDiscrete)
    expected = torch.stack([torch.zeros(3, 4), torch.zeros(3, 4)], dim).shape
    assert out.shape == expected


def test_stack_of_equal_composites_is_dense() -> None:
    c = Composite(obs=Unbounded(shape=(2, 3)), shape=(2,))
    out = torch.stack([c, c.clone()], 0)
    assert type(out) is Composite and out.shape == (2, 2) and out["obs"].shape == (2, 2, 3)


def test_stack_refuses_mixed_types_dtypes_ndims() -> None:
    with pytest.raises(RuntimeError, match="more than one type"):
        torch.stack([Bounded(-1.0, 1.0, shape=(2,)), Unbounded(shape=(2,))])
    with pytest.raises(RuntimeError, match="Dtypes differ"):
        torch.stack([Unbounded(shape=(2,)), Unbounded(shape=(2,), dtype=torch.float64)])
    with pytest.raises(RuntimeError, match="Ndims differ"):
        torch.stack([Unbounded(shape=(2,)), Unbounded(shape=(2, 1))])


def test_heterogeneous_leaf_stack() -> None:
    lo, hi = Bounded(0.0, 1.0, shape=(2,)), Bounded(5.0, 6.0, shape=(2,))
    spec = torch.stack([lo, hi], 0)
    assert isinstance(spec, Stacked) and spec.shape == (2, 2)
    assert spec[0] == lo and spec[1] == hi
    value = spec.rand((3,))
    assert value.shape == (3, 2, 2)
    assert bool((value[:, 0] <= 1).all()) and bool((value[:, 1] >= 5).all())
    assert spec.is_in(value)
    assert not spec.is_in(torch.stack([hi.rand(), lo.rand()]))
    ragged = torch.stack([Unbounded(shape=(2,)), Unbounded(shape=(3,))])
    assert ragged.shape == (2, -1)
    nested = ragged.zero()
    assert nested.is_nested and [t.shape for t in nested.unbind()] == [(2,), (3,)]
    assert ragged.is_in(nested)


def test_heterogeneous_composite_stack() -> None:
    a = Composite(obs=Unbounded(shape=(3,)), extra=Unbounded(shape=(1,)))
    b = Composite(obs=Unbounded(shape=(4,)))
    spec = torch.stack([a, b], 0)
    assert isinstance(spec, StackedComposite)
    assert spec.keys() == ["obs"] and spec.shape == (2,)
    assert spec[0] == a and spec[1] == b
    td = spec.rand()
    assert isinstance(td, LazyStackedTensorDict)
    assert td[0]["obs"].shape == (3,) and td[1]["obs"].shape == (4,)
    assert spec.is_in(td)
    wrong = LazyStackedTensorDict.lazy_stack([b.zero(), a.zero()])
    assert not spec.is_in(wrong)
    assert not spec.is_in(TensorDict(obs=torch.zeros(2, 3), batch_size=[2]))
    assert isinstance(spec["obs"], Stacked)
    assert spec.clone() == spec


def test_torch_squeeze_unsqueeze_of_specs() -> None:
    spec = Unbounded(shape=(1, 3))
    assert torch.squeeze(spec, 0).shape == (3,)
    assert torch.unsqueeze(spec, 0).shape == (1, 1, 3)
    with pytest.raises(TypeError, match="does not apply to specs"):
        torch.cat([spec, spec])


def _hetero() -> StackedComposite:
    a = Composite(action=Bounded(-1.0, 1.0, shape=(3,)))
    b = Composite(action=Bounded(-1.0, 1.0, shape=(2,)))
    return torch.stack([a, b, b.clone()], 0)


def test_composite_holds_a_lazy_stack_as_an_entry() -> None:
    # TorchRL's heterogeneous envs: Composite(lazy=torch.stack(per-agent Composites))
    spec = Composite(lazy=_hetero(), state=Unbounded(shape=(4,)))
    assert spec.keys(True, True) == [("lazy", "action"), "state"]
    assert ("lazy", "action") in spec.keys(True)
    assert isinstance(spec["lazy", "action"], Stacked) and spec["lazy", "action"].shape == (3, -1)
    td = spec.rand()
    assert isinstance(td.get("lazy"), LazyStackedTensorDict)
    assert [t["action"].shape for t in td["lazy"].tensordicts] == [(3,), (2,), (2,)]
    assert spec.is_in(td) and spec.explain(td) is None
    td["lazy"].tensordicts[1]["action"] += 5.0
    assert not spec.is_in(td)
    spec.project(td)
    assert spec.is_in(td) and bool((td["lazy"].tensordicts[1]["action"] <= 1).all())
    assert spec.clone() == spec


def test_a_composite_with_a_lazy_stack_expands_and_indexes_along_its_batch() -> None:
    spec = Composite(lazy=_hetero()).expand(2)
    assert spec.shape == (2,) and spec["lazy"].shape == (2, 3) and spec["lazy"].dim == 1
    assert spec["lazy", "action"].shape == (2, 3, -1)
    td = spec.zero()
    assert td.batch_size == (2,) and td["lazy"].batch_size == (2, 3)
    assert [t["action"].shape for t in td["lazy"].unbind(1)] == [(2, 3), (2, 2), (2, 2)]
    first = spec[0]
    assert first.shape == () and first["lazy"] == _hetero()
    member = spec["lazy"][:, 1]
    assert member == Composite(action=Bounded(-1.0, 1.0, shape=(2,))).expand(2)
    assert spec["lazy"].unsqueeze(0).shape == (1, 2, 3)
    assert spec["lazy"].unsqueeze(0).squeeze(0) == spec["lazy"]
    with pytest.raises(ValueError, match="only get leading dims"):
        spec["lazy"].expand(2, 4)
