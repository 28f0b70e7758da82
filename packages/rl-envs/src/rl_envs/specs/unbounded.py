"""``Unbounded``: any value of a shape and dtype (continuous or discrete).

As in TorchRL, ``Unbounded(...)`` builds an :class:`UnboundedContinuous` for a
floating (or complex) dtype and an :class:`UnboundedDiscrete` otherwise, so
``isinstance(spec, UnboundedDiscrete)`` tells the two apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rl_envs.specs._base import ShapeLike, TensorSpec
from rl_envs.specs._dtypes import to_torch_dtype
from rl_envs.specs._spaces import ContinuousBox

__all__ = ["Unbounded", "UnboundedContinuous", "UnboundedDiscrete"]


class Unbounded(TensorSpec):
    """Any value of a given shape and dtype.

    ``rand`` draws standard normals for floating dtypes and uniform integers over
    the dtype's range for integer dtypes (``0``/``1`` for ``torch.bool``).

    Args:
        shape: the full shape of a value (batch dims included). Defaults to ``(1,)``.
        device: the device of a value. Defaults to CPU.
        dtype: the dtype of a value. Defaults to ``torch.get_default_dtype()``.

    Example:
        >>> import torch
        >>> spec = Unbounded(shape=(3,), dtype=torch.float32)
        >>> spec.rand((2,)).shape
        torch.Size([2, 3])
        >>> spec.is_in(torch.zeros(3)), spec.is_in(torch.zeros(3, dtype=torch.float64))
        (True, False)
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Unbounded:
        # the dtype picks the subclass (TorchRL's behaviour); it is the third argument
        default = torch.int64 if cls is UnboundedDiscrete else None
        dtype = to_torch_dtype(args[2] if len(args) > 2 else kwargs.get("dtype"), default)
        target = UnboundedContinuous if _is_continuous(dtype) else UnboundedDiscrete
        obj = super().__new__(target)
        if not issubclass(target, cls):  # Python skips __init__ then: run it here
            obj.__init__(*args, **kwargs)
        return obj

    def __init__(
        self, shape: ShapeLike | None = (1,), device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__(shape if shape is not None else (1,), device, to_torch_dtype(dtype))
        self._space: ContinuousBox | None = None

    @property
    def space(self) -> ContinuousBox:
        """Infinite (or dtype-limit) bounds, for code that reads ``spec.space.low/high``."""
        if self._space is None:
            if self.dtype.is_floating_point:
                lo, hi = -float("inf"), float("inf")
            elif self.dtype == torch.bool:
                lo, hi = False, True
            else:
                info = torch.iinfo(self.dtype)
                lo, hi = info.min, info.max
            self._space = ContinuousBox(
                torch.full(self.shape, lo, dtype=self.dtype, device=self.device),
                torch.full(self.shape, hi, dtype=self.dtype, device=self.device),
            )
        return self._space

    @property
    def low(self) -> torch.Tensor:
        """Lower bound (``-inf`` or the dtype's minimum)."""
        return self.space.low

    @property
    def high(self) -> torch.Tensor:
        """Upper bound (``inf`` or the dtype's maximum)."""
        return self.space.high

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Normals (floating dtypes) or integers over the dtype's range, ``shape`` prepended."""
        full = self._full_shape(shape)
        if self.dtype.is_floating_point or self.dtype.is_complex:
            return torch.randn(full, dtype=self.dtype, device=self.device)
        return torch.empty(full, dtype=self.dtype, device=self.device).random_()

    def _domain_text(self) -> str:
        return "any value"

    def _remap(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Unbounded:
        return Unbounded(shape=fn(self._meta()).shape, device=self.device, dtype=self.dtype)

    def _with(self, **changes: Any) -> Unbounded:
        return Unbounded(
            shape=changes.get("shape", self.shape),
            device=changes.get("device", self.device),
            dtype=changes.get("dtype", self.dtype),
        )


def _is_continuous(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


class UnboundedContinuous(Unbounded):
    """:class:`Unbounded` with a floating dtype (what ``Unbounded(...)`` builds for one).

    Example:
        >>> import torch
        >>> isinstance(Unbounded(shape=(2,)), UnboundedContinuous)
        True
        >>> type(UnboundedContinuous(shape=(2,), dtype=torch.int64)).__name__
        'UnboundedDiscrete'
    """


class UnboundedDiscrete(Unbounded):
    """:class:`Unbounded` with an integer (or bool) dtype; ``dtype`` defaults to ``torch.int64``.

    Example:
        >>> UnboundedDiscrete(shape=(2,)).dtype
        torch.int64
    """

    def __init__(
        self, shape: ShapeLike | None = (1,), device: Any = None, dtype: Any = torch.int64
    ) -> None:
        super().__init__(shape, device, to_torch_dtype(dtype, torch.int64))
