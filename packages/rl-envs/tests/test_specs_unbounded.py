"""Unbounded: values of any range, continuous or discrete."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_envs.specs import Unbounded


def test_defaults_follow_torchrl():
    spec = Unbounded()
    assert spec.shape == torch.Size([1]) and spec.dtype == torch.float32
    assert spec.device == torch.device("cpu") and spec.domain == "continuous"
    assert Unbounded(shape=3).shape == torch.Size([3])


def test_float_rand_is_standard_normal():
    torch.manual_seed(0)
    x = Unbounded(shape=(2,)).rand((20000,))
    assert abs(float(x.mean())) < 0.03 and abs(float(x.std()) - 1.0) < 0.03


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_integer_rand_has_dtype_and_varies(dtype):
    spec = Unbounded(shape=(500,), dtype=dtype)
    x = spec.rand()
    assert x.dtype == dtype and spec.is_in(x) and spec.domain == "discrete"
    assert len(set(x.tolist())) > 1


def test_space_is_infinite_or_dtype_limits():
    assert torch.isinf(Unbounded(shape=(2,)).space.low).all()
    spec = Unbounded(shape=(2,), dtype=torch.int16)
    assert spec.low.tolist() == [-32768] * 2 and spec.high.tolist() == [32767] * 2


def test_is_in_accepts_any_value_of_shape_and_dtype():
    spec = Unbounded(shape=(3,))
    assert spec.is_in(torch.tensor([1e30, -1e30, float("inf")]))
    assert not spec.is_in(torch.zeros(3, dtype=torch.float64))
    assert not spec.is_in(torch.zeros(4))
    assert not spec.is_in(torch.zeros(3, 1))


def test_project_casts():
    out = Unbounded(shape=(2,), dtype=torch.int64).project(torch.tensor([1.0, 2.0]))
    assert out.dtype == torch.int64 and out.tolist() == [1, 2]


@pytest.mark.parametrize(
    ("value", "shape", "expected"),
    [
        (np.float64(0.5), (1,), [0.5]),
        (3, (1,), [3.0]),
        (np.array([[1.0, 2.0]]), (2,), [1.0, 2.0]),  # non-tensors take the spec's shape
        (np.arange(6).reshape(2, 3), (6,), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
        ([np.array([1.0, 2.0])], (2,), [1.0, 2.0]),
        (torch.tensor([1, 2]), (2,), [1.0, 2.0]),
    ],
)
def test_encode(value, shape, expected):
    out = Unbounded(shape=shape).encode(value)
    assert out.dtype == torch.float32 and out.tolist() == expected


def test_encode_int_and_bool_dtypes():
    assert (
        Unbounded(shape=(2,), dtype=torch.int64).encode(np.array([1, 2], np.int32)).dtype
        == torch.int64
    )
    out = Unbounded(shape=(1,), dtype=torch.bool).encode(True)
    assert out.dtype == torch.bool and out.tolist() == [True]
    out = Unbounded(shape=(2,), dtype=torch.bfloat16).encode(np.array([1.0, 2.0]))
    assert out.dtype == torch.bfloat16 and out.tolist() == [1.0, 2.0]


def test_to_numpy():
    arr = Unbounded(shape=(2,)).to_numpy(torch.tensor([1.0, 2.0]))
    assert isinstance(arr, np.ndarray) and arr.tolist() == [1.0, 2.0]


def test_repr():
    assert repr(Unbounded(shape=(2,))) == (
        "UnboundedContinuous(\n    shape=torch.Size([2]),\n    device=cpu,\n    dtype=torch.float32,\n"
        "    domain=continuous)"
    )
