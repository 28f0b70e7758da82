"""numpy / python / string dtype -> torch dtype mapping."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_envs.specs import to_numpy_dtype, to_torch_dtype
from rl_envs.specs._dtypes import to_device


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (np.float32, torch.float32),
        (np.dtype("float64"), torch.float64),
        (np.uint8, torch.uint8),
        (np.int8, torch.int8),
        (np.int32, torch.int32),
        (np.int64, torch.int64),
        (np.uint16, torch.int32),
        (np.uint32, torch.int64),
        (np.bool_, torch.bool),
        ("float16", torch.float16),
        ("torch.int16", torch.int16),
        ("bfloat16", torch.bfloat16),
        (bool, torch.bool),
        (int, torch.int64),
        (float, torch.float32),
        (torch.float64, torch.float64),
        (None, torch.float32),
    ],
)
def test_to_torch_dtype(given, expected):
    assert to_torch_dtype(given) is expected


def test_numpy_round_trip_for_every_torch_dtype_it_names():
    for dtype in (
        torch.bool,
        torch.uint8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.float32,
    ):
        assert to_torch_dtype(to_numpy_dtype(dtype)) is dtype
    assert to_numpy_dtype(torch.bfloat16) == np.float32


def test_errors_name_the_input():
    with pytest.raises(TypeError, match="no torch equivalent"):
        to_torch_dtype(np.dtype("U3"))
    with pytest.raises(TypeError, match="Cannot convert"):
        to_torch_dtype(object())
    with pytest.raises(TypeError, match="no numpy"):
        to_numpy_dtype(torch.quint8)


def test_to_device():
    assert to_device("cpu") == torch.device("cpu")
    assert to_device(None) is None
    assert to_device(1) == torch.device("cuda", 1)
