"""``NonTensor``: entries that are not tensors (strings, python objects) held as ``NonTensorData``."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import NonTensorData, NonTensorStack

from rl_envs.specs._base import ShapeLike, TensorSpec

__all__ = ["NonTensor"]


class NonTensor(TensorSpec):
    """A non-tensor entry (text, a python object) of a TensorDict.

    ``rand``/``zero``/``one`` return ``NonTensorData(example_data)`` with the
    spec's shape as batch size; ``encode`` wraps any python value the same way;
    ``project`` returns the value unchanged. ``is_in`` accepts a python object or a
    ``NonTensorData``/``NonTensorStack`` whose batch size ends with ``shape``,
    and rejects tensors. The device is not checked (non-tensor data has none
    that matters).

    Args:
        shape: the batch shape of the entry. Defaults to ``()``.
        device: defaults to CPU.
        dtype: kept for API parity (TorchRL); ``None`` by default.
        example_data: the value ``rand``/``zero`` return.

    Example:
        >>> spec = NonTensor(shape=(2,), example_data="hello")
        >>> value = spec.zero()
        >>> value.data, value.batch_size
        ('hello', torch.Size([2]))
        >>> spec.is_in(value), spec.is_in("any string")
        (True, True)
    """

    def __init__(
        self,
        shape: ShapeLike | None = None,
        device: Any = None,
        dtype: Any = None,
        example_data: Any = None,
    ) -> None:
        super().__init__(shape, device, dtype)
        self.example_data = example_data

    def rand(self, shape: ShapeLike | None = None) -> NonTensorData:
        """``NonTensorData(example_data)`` with batch size ``(*shape, *self.shape)``."""
        return NonTensorData(
            data=self.example_data, batch_size=self._full_shape(shape), device=self.device
        )

    def zero(self, shape: ShapeLike | None = None) -> NonTensorData:
        """Same as :meth:`rand`."""
        return self.rand(shape)

    def one(self, shape: ShapeLike | None = None) -> NonTensorData:
        """Same as :meth:`rand`."""
        return self.rand(shape)

    def _meta_reason(self, val: Any) -> str | None:
        if isinstance(val, torch.Tensor):
            return "expected non-tensor data, got a torch.Tensor"
        if isinstance(val, (NonTensorData, NonTensorStack)):
            vs = val.batch_size
            n = self.ndim
            if len(vs) < n or (n and vs[len(vs) - n :] != self.shape):
                return f"expected batch size ending with {tuple(self.shape)}, got {tuple(vs)}"
        return None

    def is_in(self, val: Any) -> bool:
        """Whether ``val`` is non-tensor data of a compatible batch size."""
        return self._meta_reason(val) is None

    def explain(self, val: Any) -> str | None:
        """Why ``val`` is not in the spec, or ``None``."""
        return self._meta_reason(val)

    def project(self, val: Any) -> Any:
        """Returns ``val`` unchanged: there is no notion of distance for non-tensor data."""
        return val

    def encode(self, val: Any) -> NonTensorData:
        """Wraps ``val`` in ``NonTensorData`` with the spec's shape as batch size."""
        if isinstance(val, (NonTensorData, NonTensorStack)):
            return val
        return NonTensorData(data=val, batch_size=self.shape, device=self.device)

    def to_numpy(self, val: Any) -> Any:
        """The python value held (``val.data`` for ``NonTensorData``)."""
        if isinstance(val, NonTensorData):
            return val.data
        if isinstance(val, NonTensorStack):
            return val.tolist()
        return val

    def _remap(self, fn: Any) -> NonTensor:
        return NonTensor(fn(self._meta()).shape, self.device, self.dtype, self.example_data)

    def _with(self, **changes: Any) -> NonTensor:
        return NonTensor(
            self.shape,
            changes.get("device", self.device),
            changes.get("dtype", self.dtype),
            self.example_data,
        )

    def to(self, dest: Any) -> NonTensor:
        """The spec on another device (a dtype argument is ignored: non-tensors have none)."""
        if isinstance(dest, torch.dtype):
            return self
        return super().to(dest)  # type: ignore[return-value]

    @property
    def domain(self) -> str:
        """Always ``"non-tensor"``."""
        return "non-tensor"

    def _repr_fields(self) -> list[str]:
        return [f"example_data={self.example_data!r}"]
