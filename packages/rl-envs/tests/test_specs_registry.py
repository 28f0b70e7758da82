"""rl_envs.specs._registry: the spec conversions and torch.stack resolve through it."""

from __future__ import annotations

import pytest
import torch

from rl_envs.specs import Categorical, MultiCategorical, MultiOneHot, OneHot, Stacked, _registry


def test_conversions_return_the_registered_classes() -> None:
    assert type(Categorical(3).to_one_hot_spec()) is OneHot
    assert type(OneHot(3).to_categorical_spec()) is Categorical
    assert type(MultiCategorical([2, 3]).to_one_hot_spec()) is MultiOneHot
    assert type(MultiOneHot([2, 3]).to_categorical_spec()) is MultiCategorical


def test_torch_stack_of_specs_goes_through_the_registry() -> None:
    a, b = Categorical(3, shape=(2,)), Categorical(3, shape=(3,))
    assert isinstance(torch.stack([a, b]), Stacked)
    assert _registry.lookup("stack_specs").__module__ == "rl_envs.specs.stacked"


def test_an_unknown_name_raises_a_lookup_error_naming_it() -> None:
    with pytest.raises(LookupError, match="'NoSuchSpec'"):
        _registry.lookup("NoSuchSpec")
