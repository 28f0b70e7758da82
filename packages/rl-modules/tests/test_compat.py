"""is_tensordict_compatible / ensure_tensordict_compatible and VmapModule."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from rl_modules import (
    SafeModule,
    VmapModule,
    ensure_tensordict_compatible,
    is_tensordict_compatible,
)


class KeyedModule(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.in_keys, self.out_keys = ["a"], ["b"]

    def forward(self, tensordict):
        return tensordict.set("b", tensordict["a"] + 1)


class TwoArgsWithKeys(KeyedModule):
    def forward(self, a, b):
        return a + b


class Add(nn.Module):
    def forward(self, x, y):
        return x + y


def test_is_tensordict_compatible():
    assert is_tensordict_compatible(SafeModule(nn.Linear(2, 2), in_keys=["x"], out_keys=["y"]))
    assert is_tensordict_compatible(KeyedModule())
    assert not is_tensordict_compatible(nn.Linear(2, 2))
    with pytest.raises(TypeError, match="forward takes 2 arguments"):
        is_tensordict_compatible(TwoArgsWithKeys())


def test_ensure_returns_compatible_module_and_checks_keys():
    module = KeyedModule()
    assert ensure_tensordict_compatible(module) is module
    assert ensure_tensordict_compatible(module, in_keys=["a"], out_keys=["b"]) is module
    with pytest.raises(TypeError, match="in_keys"):
        ensure_tensordict_compatible(module, in_keys=["x"])
    with pytest.raises(TypeError, match="out_keys"):
        ensure_tensordict_compatible(module, out_keys=["x"])


def test_ensure_wraps_tensor_module_by_argument_names():
    wrapped = ensure_tensordict_compatible(Add(), in_keys=["y", "x"], out_keys=["z"])
    assert isinstance(wrapped, TensorDictModule)
    out = wrapped(TensorDict(x=torch.ones(2), y=torch.full((2,), 2.0)))
    torch.testing.assert_close(out["z"], torch.full((2,), 3.0))
    with pytest.raises(TypeError, match="argument names"):
        ensure_tensordict_compatible(Add(), in_keys=["input"])
    with pytest.raises(TypeError, match=r"nn\.Module"):
        ensure_tensordict_compatible(object())


@pytest.mark.parametrize("mock", [False, True])
@pytest.mark.parametrize("dim", [0, None])
def test_vmap_module_hides_the_mapped_dim(mock, dim):
    first_row = TensorDictModule(lambda x: x[0], in_keys=["x"], out_keys=["y"])
    x = torch.randn(4, 3, 2)
    td = TensorDict(x=x, batch_size=[4])
    out = VmapModule(first_row, dim, mock=mock)(td)
    assert out is td
    torch.testing.assert_close(out["y"], x[:, 0])  # each of the 4 items sees a [3, 2] x


@pytest.mark.parametrize("mock", [False, True])
def test_vmap_module_over_an_inner_dim(mock):
    minus_first = TensorDictModule(lambda x: x - x[0], in_keys=["x"], out_keys=["y"])
    x = torch.randn(4, 5, 3)
    out = VmapModule(minus_first, 1, mock=mock)(TensorDict(x=x, batch_size=[4, 5]))
    # mapped over dim 1, the module sees [4, 3] slices; x[0] is their first row
    torch.testing.assert_close(out["y"], x - x[:1])


def test_vmap_module_needs_a_batch_dim():
    module = VmapModule(TensorDictModule(lambda x: x, in_keys=["x"], out_keys=["y"]))
    with pytest.raises(ValueError, match="batch dimension"):
        module(TensorDict(x=torch.zeros(3)))
