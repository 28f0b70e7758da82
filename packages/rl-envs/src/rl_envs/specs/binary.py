"""``Binary``: vectors of 0/1 entries (any number of ones), e.g. a Gymnasium ``MultiBinary``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rl_envs.specs._base import ShapeLike, TensorSpec, as_size
from rl_envs.specs.categorical import Categorical

__all__ = ["Binary"]


class Binary(Categorical):
    """Binary vectors: every entry is 0 or 1 (``False``/``True`` for ``torch.bool``).

    Unlike :class:`OneHot`, any number of entries may be 1. ``space.n`` is 2
    (the values an entry takes); the length of the vector is ``shape[-1]``.

    Args:
        n: the length of the vector; if ``shape`` is also given, ``shape[-1]`` must equal it.
        shape: the full shape; defaults to ``(n,)``.
        device: defaults to CPU.
        dtype: defaults to ``torch.int8``.

    Example:
        >>> import torch
        >>> spec = Binary(4)
        >>> spec.rand().shape, spec.rand().dtype
        (torch.Size([4]), torch.int8)
        >>> spec.project(torch.tensor([0.2, 0.9, -3.0, 2.0]))
        tensor([0, 1, 0, 1], dtype=torch.int8)
    """

    _domain_dims = 1

    def __init__(
        self,
        n: int | None = None,
        shape: ShapeLike | None = None,
        device: Any = None,
        dtype: Any = torch.int8,
    ) -> None:
        if n is None and shape is None:
            raise TypeError("Binary needs n (the vector length) or shape.")
        shape = as_size((n,) if shape is None else shape)
        if n is not None and (len(shape) == 0 or shape[-1] != n):
            raise ValueError(f"Binary: shape[-1] must equal n={n}, got shape {tuple(shape)}.")
        if len(shape) == 0:
            raise ValueError("Binary needs a non-empty shape (its last dim is the vector).")
        super().__init__(2, shape, device, dtype)

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Binary specs have no mask (every entry is free to be 0 or 1)."""
        raise TypeError(
            "Binary specs do not support masks; use Categorical or OneHot for masked actions."
        )

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Independent fair coin flips, ``shape`` prepended."""
        full = self._full_shape(shape)
        if self.dtype == torch.bool:
            return torch.randint(0, 2, full, device=self.device).bool()
        return torch.randint(0, 2, full, dtype=self.dtype, device=self.device)

    def _in_range(self, val: torch.Tensor) -> bool:
        return self.dtype == torch.bool or torch.equal(val.clamp(0, 1), val)

    def _domain_text(self) -> str:
        return "entries equal to 0 or 1"

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        val = val.to(device=self.device)
        if val.dtype == torch.bool:
            return val.to(self.dtype)
        return (val > 0.5).to(self.dtype)

    def squeeze(self, dim: int | None = None) -> Binary:
        """The spec without size-1 dims; the last dim may go too (entries are independent)."""
        shape = torch.empty(self.shape, device="meta")
        shape = (shape.squeeze() if dim is None else shape.squeeze(dim)).shape
        if len(shape) == 0:
            raise ValueError(f"Binary.squeeze({dim}): a Binary spec keeps at least one dim.")
        return Binary(shape=shape, device=self.device, dtype=self.dtype)

    def unsqueeze(self, dim: int) -> Binary:
        """The spec with a size-1 dim at ``dim``, the last position included (TorchRL's rule:
        ``Binary(4).unsqueeze(-1)`` has shape ``(4, 1)``).

        Example:
            >>> Binary(4).unsqueeze(-1).shape
            torch.Size([4, 1])
        """
        shape = torch.empty(self.shape, device="meta").unsqueeze(dim).shape
        return Binary(shape=shape, device=self.device, dtype=self.dtype)

    def _remap(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Binary:
        return Binary(shape=fn(self._meta()).shape, device=self.device, dtype=self.dtype)

    def _with(self, **changes: Any) -> Binary:
        return Binary(
            shape=self.shape,
            device=changes.get("device", self.device),
            dtype=changes.get("dtype", self.dtype),
        )

    def _same_params(self, other: TensorSpec) -> bool:
        return True

    def _repr_fields(self) -> list[str]:
        return [f"n={self.shape[-1]}"]
