"""``Choice``: values from one of several specs (or fixed non-tensor values)."""

from __future__ import annotations

import pytest
import torch
from tensordict import NonTensorData

from rl_envs import Bounded, Choice, Unbounded


def test_choice_of_specs_draws_from_each() -> None:
    torch.manual_seed(0)
    spec = Choice([Bounded(0.0, 1.0, shape=(1,)), Bounded(10.0, 11.0, shape=(1,))])
    draws = torch.stack([spec.rand() for _ in range(200)])
    low, high = (draws <= 1).sum().item(), (draws >= 10).sum().item()
    assert low + high == 200 and low > 50 and high > 50
    assert spec.is_in(torch.tensor([0.5])) and spec.is_in(torch.tensor([10.5]))
    assert not spec.is_in(torch.tensor([5.0]))
    assert spec.zero().item() == 0.0 and spec.one().item() == 1.0
    assert spec.expand(3, 1).rand().shape == (3, 1)
    assert spec.clone() == spec and spec.num_choices == 2


def test_choice_of_non_tensor_data() -> None:
    spec = Choice([NonTensorData(s) for s in ["a", "b", "c"]])
    seen = {spec.rand().data for _ in range(100)}
    assert seen == {"a", "b", "c"}
    assert spec.is_in(NonTensorData("b")) and not spec.is_in(NonTensorData("z"))


def test_choice_refuses_mixed_choices() -> None:
    with pytest.raises(TypeError, match="list"):
        Choice((Unbounded(shape=(1,)),))
    with pytest.raises(TypeError, match="one type"):
        Choice([Unbounded(shape=(1,)), Bounded(0.0, 1.0, shape=(1,))])
    with pytest.raises(ValueError, match="shape"):
        Choice([Unbounded(shape=(1,)), Unbounded(shape=(2,))])
