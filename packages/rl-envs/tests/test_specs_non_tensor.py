"""NonTensor: non-tensor entries as NonTensorData."""

from __future__ import annotations

import torch
from tensordict import NonTensorData, NonTensorStack

from rl_envs.specs import NonTensor


def test_values_are_non_tensor_data():
    spec = NonTensor(shape=(3,), example_data="hello")
    for value in (spec.rand(), spec.zero(), spec.one()):
        assert isinstance(value, NonTensorData) and value.data == "hello"
        assert value.batch_size == torch.Size([3])
    assert spec.rand((2,)).batch_size == torch.Size([2, 3])


def test_is_in():
    spec = NonTensor(shape=(2,))
    assert spec.is_in(NonTensorData("x", batch_size=[2]))
    assert spec.is_in(NonTensorData("x", batch_size=[5, 2]))
    assert spec.is_in(NonTensorStack(NonTensorData("a"), NonTensorData("b")))
    assert spec.is_in({"any": "python object"})
    assert not spec.is_in(NonTensorData("x", batch_size=[3]))
    assert not spec.is_in(torch.zeros(2))
    assert "batch size" in spec.explain(NonTensorData("x", batch_size=[3]))


def test_encode_project_to_numpy():
    spec = NonTensor(example_data=0)
    value = spec.encode("text")
    assert isinstance(value, NonTensorData) and value.data == "text"
    assert spec.project("anything") == "anything"
    assert spec.to_numpy(value) == "text"


def test_copies_equality_shape_ops():
    spec = NonTensor(shape=(2,), example_data="x")
    assert spec.clone() == spec and spec.to(torch.float32) is spec
    assert spec.expand(3, 2).shape == torch.Size([3, 2])
    assert spec.unsqueeze(0).shape == torch.Size([1, 2])
    assert spec.expand(3, 2)[0] == spec
    assert spec.domain == "non-tensor"
    assert "example_data='x'" in repr(spec)
