"""Conversions between numpy, python and torch dtypes, and device normalisation.

Specs store a ``torch.dtype``; Gymnasium spaces and user code hand us numpy
dtypes, strings or python types. Everything goes through :func:`to_torch_dtype`.

Unsigned numpy integers wider than 8 bits are widened to the next signed torch
integer (``uint16 -> int32``, ``uint32 -> int64``) because most torch ops
(``clamp``, ``randint``, comparisons) are not implemented for ``torch.uint16``
and ``torch.uint32``; ``uint64`` maps to ``int64`` (values above 2**63 - 1 do not fit).

Example:
    >>> import numpy as np, torch
    >>> to_torch_dtype(np.float32)
    torch.float32
    >>> to_torch_dtype("int64")
    torch.int64
    >>> to_numpy_dtype(torch.bool)
    dtype('bool')
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = [
    "NUMPY_TO_TORCH_DTYPE",
    "TORCH_TO_NUMPY_DTYPE",
    "to_device",
    "to_numpy_dtype",
    "to_torch_dtype",
]

NUMPY_TO_TORCH_DTYPE: dict[np.dtype, torch.dtype] = {
    np.dtype(np.bool_): torch.bool,
    np.dtype(np.uint8): torch.uint8,
    np.dtype(np.int8): torch.int8,
    np.dtype(np.int16): torch.int16,
    np.dtype(np.int32): torch.int32,
    np.dtype(np.int64): torch.int64,
    np.dtype(np.uint16): torch.int32,
    np.dtype(np.uint32): torch.int64,
    np.dtype(np.uint64): torch.int64,
    np.dtype(np.float16): torch.float16,
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
    np.dtype(np.complex64): torch.complex64,
    np.dtype(np.complex128): torch.complex128,
}

TORCH_TO_NUMPY_DTYPE: dict[torch.dtype, np.dtype] = {
    torch.bool: np.dtype(np.bool_),
    torch.uint8: np.dtype(np.uint8),
    torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
    torch.float16: np.dtype(np.float16),
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.complex64: np.dtype(np.complex64),
    torch.complex128: np.dtype(np.complex128),
}

_PY_TYPES: dict[type, torch.dtype] = {bool: torch.bool, int: torch.int64, complex: torch.complex64}


def to_torch_dtype(dtype: Any, default: torch.dtype | None = None) -> torch.dtype:
    """Returns the ``torch.dtype`` matching ``dtype``.

    Args:
        dtype: a ``torch.dtype``, a numpy dtype or scalar type (``np.float32``),
            a string (``"float32"``, ``"torch.float32"``), a python type
            (``bool``, ``int``, ``float``) or ``None``.
        default: returned when ``dtype`` is ``None``; ``None`` means
            ``torch.get_default_dtype()``.

    Returns:
        The torch dtype.

    Raises:
        TypeError: when ``dtype`` has no torch equivalent.

    Example:
        >>> to_torch_dtype(None)
        torch.float32
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None:
        return torch.get_default_dtype() if default is None else default
    if dtype is float:
        return torch.get_default_dtype()
    if isinstance(dtype, type) and dtype in _PY_TYPES:
        return _PY_TYPES[dtype]
    if isinstance(dtype, str):
        name = dtype.removeprefix("torch.")
        candidate = getattr(torch, name, None)
        if isinstance(candidate, torch.dtype):
            return candidate
    try:
        np_dtype = np.dtype(dtype)
    except TypeError as err:
        raise TypeError(
            f"Cannot convert {dtype!r} to a torch dtype: expected a torch.dtype, a numpy "
            f"dtype, a dtype name such as 'float32', or a python type (bool, int, float)."
        ) from err
    try:
        return NUMPY_TO_TORCH_DTYPE[np_dtype]
    except KeyError:
        raise TypeError(
            f"numpy dtype {np_dtype} has no torch equivalent; supported: "
            f"{sorted(str(d) for d in NUMPY_TO_TORCH_DTYPE)}."
        ) from None


def to_numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """Returns the numpy dtype of a torch dtype (``bfloat16`` maps to ``float32``).

    Example:
        >>> to_numpy_dtype(torch.int64)
        dtype('int64')
    """
    if dtype == torch.bfloat16:
        return np.dtype(np.float32)
    try:
        return TORCH_TO_NUMPY_DTYPE[dtype]
    except KeyError:
        raise TypeError(f"torch dtype {dtype} has no numpy equivalent.") from None


def to_device(device: Any, default: torch.device | None = None) -> torch.device | None:
    """Normalises a device argument (``"cpu"``, ``0``, ``torch.device``) to ``torch.device``.

    ``None`` returns ``default``. A bare ``"cuda"`` is kept as given (no index
    is added), so two specs built with ``"cuda"`` compare equal.

    Example:
        >>> to_device("cpu")
        device(type='cpu')
    """
    if device is None:
        return default
    if isinstance(device, torch.device):
        return device
    if isinstance(device, int):
        return torch.device("cuda", device)
    return torch.device(device)
