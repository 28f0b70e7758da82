"""Behaviour shared by every leaf spec: values, shape ops, copies, equality, repr."""

from __future__ import annotations

import pytest
import torch

from rl_envs.specs import (
    Binary,
    Bounded,
    Categorical,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Unbounded,
)

# (factory(batch) -> spec, number of trailing domain dims that shape ops keep)
SPECS = {
    "unbounded": (lambda b: Unbounded(shape=(*b, 3)), 0),
    "unbounded_int": (lambda b: Unbounded(shape=(*b, 2), dtype=torch.int32), 0),
    "bounded": (lambda b: Bounded(-1.0, 2.0, shape=(*b, 3)), 0),
    "bounded_vec": (
        lambda b: Bounded(torch.tensor([0.0, -5.0]), torch.tensor([1.0, 5.0]), shape=(*b, 2)),
        0,
    ),
    "bounded_int": (lambda b: Bounded(-2, 3, shape=(*b, 2), dtype=torch.int64), 0),
    "categorical": (lambda b: Categorical(5, shape=(*b, 1)), 0),
    "one_hot": (lambda b: OneHot(4, shape=(*b, 4)), 1),
    "binary": (lambda b: Binary(3, shape=(*b, 3)), 1),
    "multi_categorical": (lambda b: MultiCategorical([3, 2, 4], shape=(*b, 3)), 1),
    "multi_one_hot": (lambda b: MultiOneHot([2, 3], shape=(*b, 5)), 1),
}
IDS = list(SPECS)


def make(name: str, batch: tuple[int, ...] = ()):
    return SPECS[name][0](batch)


@pytest.mark.parametrize("name", IDS)
@pytest.mark.parametrize("lead", [(), (4,), (2, 3)])
def test_rand_is_in_with_leading_dims(name, lead):
    spec = make(name, (2,))
    torch.manual_seed(0)
    value = spec.rand(lead)
    assert value.shape == torch.Size([*lead, *spec.shape])
    assert value.dtype == spec.dtype and value.device == spec.device
    assert spec.is_in(value)
    assert spec.explain(value) is None
    spec.assert_is_in(value)


@pytest.mark.parametrize("name", IDS)
def test_zero_one_shapes_and_dtypes(name):
    spec = make(name, (2,))
    for value in (spec.zero(), spec.one(), spec.zero((3,)), spec.one(5)):
        assert value.shape[-spec.ndim :] == spec.shape
        assert value.dtype == spec.dtype
    assert bool((spec.zero() == 0).all()) and bool((spec.one() == 1).all())
    assert spec.zero((3,)).shape == torch.Size([3, *spec.shape])


@pytest.mark.parametrize("name", IDS)
def test_is_in_rejects_wrong_dtype_shape_and_type(name):
    spec = make(name, (2,))
    value = spec.rand()
    other = torch.float64 if spec.dtype != torch.float64 else torch.float32
    assert not spec.is_in(value.to(other))
    assert "dtype" in spec.explain(value.to(other))
    assert not spec.is_in(value[..., :1] if spec.shape[-1] > 1 else value[:1])
    assert "shape" in spec.explain(value.reshape(-1)[:1])
    assert not spec.is_in(value.tolist())
    assert "torch.Tensor" in spec.explain(value.tolist())
    with pytest.raises(ValueError, match="my_key"):
        spec.assert_is_in(value.to(other), key="my_key")


@pytest.mark.parametrize("name", IDS)
def test_project_of_in_spec_value_is_identity(name):
    spec = make(name, (3,))
    value = spec.rand((2,))
    assert torch.equal(spec.project(value), value)


@pytest.mark.parametrize("name", IDS)
def test_expand_adds_batch_dims(name):
    spec = make(name)
    big = spec.expand(4, 2, *spec.shape)
    assert big.shape == torch.Size([4, 2, *spec.shape])
    assert type(big) is type(spec)
    assert big.is_in(big.rand())
    assert spec.expand((4, *spec.shape)) == spec.expand(4, *spec.shape)
    assert spec.expand(4, *[-1] * spec.ndim).shape == torch.Size([4, *spec.shape])
    batched = make(name, (2,))
    with pytest.raises(ValueError, match="must match"):
        batched.expand(4, 3, *batched.shape[1:])
    with pytest.raises(ValueError, match="fewer dims"):
        batched.expand(*batched.shape[1:])


@pytest.mark.parametrize("name", IDS)
def test_expand_size_one_dim(name):
    spec = make(name, (1,))
    big = spec.expand(5, *spec.shape[1:])
    assert big.shape == torch.Size([5, *spec.shape[1:]])
    assert big.is_in(big.rand())


@pytest.mark.parametrize("name", IDS)
def test_squeeze_unsqueeze_index_unbind(name):
    spec = make(name, (1, 3))
    dd = SPECS[name][1]
    squeezed = spec.squeeze(0)
    assert squeezed.shape == spec.shape[1:]
    expected = [s for i, s in enumerate(spec.shape) if s != 1 or i >= spec.ndim - dd]
    assert spec.squeeze().shape == torch.Size(expected)
    un = squeezed.unsqueeze(0)
    assert un == spec
    assert spec.unsqueeze(-1 - dd).shape[spec.ndim - dd] == 1
    assert spec[0].shape == spec.shape[1:]
    assert spec[:, 1:].shape == torch.Size([1, 2, *spec.shape[2:]])
    if dd:
        assert spec[..., 0].shape == torch.Size([1, *spec.shape[2:]])
    parts = spec.unbind(1)
    assert len(parts) == 3 and all(p.shape == torch.Size([1, *spec.shape[2:]]) for p in parts)
    for s in (squeezed, un, spec[0], *parts):
        assert s.is_in(s.rand())


# Binary's entries are independent, so TorchRL lets its shape ops reach the last dim
# (``Binary(4).unsqueeze(-1)`` has shape (4, 1)): see test_specs_binary.py.
@pytest.mark.parametrize("name", [n for n in IDS if SPECS[n][1] and n != "binary"])
def test_domain_dim_is_protected(name):
    spec = make(name, (2,))
    with pytest.raises(ValueError, match="domain"):
        spec.unsqueeze(-1)
    with pytest.raises(ValueError):
        spec.squeeze(-1)
    with pytest.raises(ValueError, match="domain"):
        spec.reshape(2 * spec.shape[-1])


@pytest.mark.parametrize("name", IDS)
def test_reshape(name):
    spec = make(name, (2, 3))
    new = spec.reshape(6, *spec.shape[2:])
    assert new.shape == torch.Size([6, *spec.shape[2:]])
    assert new.is_in(new.rand())


@pytest.mark.parametrize("name", IDS)
def test_clone_equal_and_independent(name):
    spec = make(name, (2,))
    copy = spec.clone()
    assert copy == spec and copy is not spec
    assert (copy != spec) is False
    assert spec != make(name, (3,))
    assert spec != spec.to(torch.float64) or spec.dtype == torch.float64
    assert spec != "not a spec"


@pytest.mark.parametrize("name", IDS)
def test_to_same_device_returns_self_and_dtype_changes(name):
    spec = make(name)
    assert spec.to("cpu") is spec
    assert spec.to(torch.device("cpu")) is spec
    assert spec.cpu() is spec
    if name not in ("multi_one_hot", "one_hot", "binary"):
        other = spec.to(torch.float64)
        assert other.dtype == torch.float64 and other.shape == spec.shape


@pytest.mark.parametrize("name", IDS)
def test_repr_names_the_class_shape_dtype(name):
    text = repr(make(name, (2,)))
    spec = make(name, (2,))
    assert text.startswith(type(spec).__name__ + "(")
    assert str(spec.shape) in text and str(spec.dtype) in text and "device=cpu" in text


@pytest.mark.parametrize("name", IDS)
def test_ndim_numel(name):
    spec = make(name, (2,))
    assert spec.ndim == spec.ndimension() == len(spec.shape)
    assert spec.numel() == spec.shape.numel()


@pytest.mark.parametrize("name", IDS)
def test_is_in_rejects_other_device(name):
    spec = make(name)
    meta = spec.zero().to("meta")
    assert not spec.is_in(meta)
    assert "device" in spec.explain(meta)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", IDS)
def test_cuda_round_trip(name):
    spec = make(name, (2,)).to("cuda")
    assert spec.device.type == "cuda"
    value = spec.rand()
    assert value.device.type == "cuda" and spec.is_in(value)
    assert spec.to("cpu").to("cuda") == spec
