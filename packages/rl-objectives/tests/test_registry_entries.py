"""TorchRL's registry look-ups: get_value_estimator_entry, dispatch_value_estimator."""

from __future__ import annotations

import pytest
import torch
from tensordict.nn import TensorDictModule

from rl_objectives.utils import (
    default_value_kwargs,
    dispatch_value_estimator,
    get_value_estimator_entry,
)
from rl_objectives.value import GAE, TD0Estimator, ValueEstimators


def test_entry_by_member_and_by_name_is_the_same_object():
    entry = get_value_estimator_entry(ValueEstimators.GAE)
    assert entry.cls is GAE and entry.default_kwargs["gamma"] == 0.99
    assert get_value_estimator_entry("gae") is entry
    assert get_value_estimator_entry("GAE") is entry
    assert get_value_estimator_entry("vtrace") is get_value_estimator_entry(ValueEstimators.VTrace)
    with pytest.raises(TypeError):
        entry.default_kwargs["gamma"] = 0.5  # read-only: defaults change per call, not globally
    assert default_value_kwargs(ValueEstimators.GAE) == dict(entry.default_kwargs)


def test_unknown_entries_raise():
    with pytest.raises(KeyError, match="Unknown value estimator alias"):
        get_value_estimator_entry("not_a_real_estimator")
    with pytest.raises(TypeError, match="must be a registered enum value"):
        get_value_estimator_entry(42)


class _CustomLoss(torch.nn.Module):
    gamma = 0.7

    def __init__(self) -> None:
        super().__init__()
        self.critic = TensorDictModule(torch.nn.Linear(3, 1), ["obs"], ["state_value"])

    def _value_estimator_network(self) -> TensorDictModule:
        return self.critic


def test_dispatch_builds_sets_and_keys_the_estimator():
    loss = _CustomLoss()
    est = dispatch_value_estimator(
        loss, "td0", supported=[ValueEstimators.TD0, ValueEstimators.GAE],
        tensor_keys={"value": "v"},
    )  # fmt: skip
    assert isinstance(est, TD0Estimator) and loss._value_estimator is est
    assert loss.value_type is ValueEstimators.TD0
    assert float(est.gamma) == pytest.approx(0.7)  # the loss's gamma
    assert est.value_network is loss.critic
    assert est.tensor_keys.value == "v"
    est = dispatch_value_estimator(
        loss, ValueEstimators.GAE, supported=[ValueEstimators.GAE], gamma=0.1
    )
    assert float(est.gamma) == pytest.approx(0.1)  # the call's gamma wins


def test_dispatch_unsupported_raises():
    with pytest.raises(NotImplementedError, match="Supported value types: \\['TD0'\\]"):
        dispatch_value_estimator(_CustomLoss(), "gae", supported=[ValueEstimators.TD0])
