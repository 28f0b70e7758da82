"""``MultiOneHot``: several one-hot vectors concatenated on the last dim."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from rl_envs.specs import _registry
from rl_envs.specs._base import ShapeLike, TensorSpec, as_size
from rl_envs.specs._dtypes import to_torch_dtype
from rl_envs.specs._group_mask import check_group_mask, grouped
from rl_envs.specs._mask import masked_sample
from rl_envs.specs._spaces import MultiCategoricalBox
from rl_envs.specs.multi_categorical import MultiCategorical
from rl_envs.specs.one_hot import OneHot

__all__ = ["MultiOneHot"]


@_registry.register
class MultiOneHot(OneHot):
    """Concatenated one-hot vectors: the last dim has ``sum(nvec)`` entries, split in groups of ``nvec[i]``.

    Each group holds exactly one 1. ``encode`` takes one index per group (as a
    Gymnasium ``MultiDiscrete`` gives them); ``to_numpy`` returns them.
    ``project`` takes the argmax within each group.

    Args:
        nvec: the size of each group.
        shape: the full shape; defaults to ``(sum(nvec),)``; its last dim must be ``sum(nvec)``.
        device: defaults to CPU.
        dtype: defaults to ``torch.bool``.
        mask: optional bool tensor of ``shape`` (broadcastable): ``True`` marks the
            allowed categories of each group. ``rand`` samples only allowed ones,
            ``is_in`` rejects the others, ``project`` takes the argmax among them.
            Change it with :meth:`update_mask`.

    Example:
        >>> import torch
        >>> spec = MultiOneHot([2, 3])
        >>> spec.encode([1, 0]).int()
        tensor([0, 1, 1, 0, 0], dtype=torch.int32)
        >>> spec.to_numpy(spec.encode([1, 2])).tolist()
        [1, 2]
        >>> masked = MultiOneHot([2, 3], mask=torch.tensor([False, True, False, False, True]))
        >>> masked.rand().int()
        tensor([0, 1, 0, 0, 1], dtype=torch.int32)
    """

    _domain_dims = 1

    def __init__(
        self,
        nvec: Sequence[int],
        shape: ShapeLike | None = None,
        device: Any = None,
        dtype: Any = torch.bool,
        mask: torch.Tensor | None = None,
    ) -> None:
        nvec_l = [int(n) for n in nvec]
        if not nvec_l or min(nvec_l) < 1:
            raise ValueError(
                f"MultiOneHot: nvec must be a non-empty list of sizes >= 1, got {nvec_l}."
            )
        total = sum(nvec_l)
        shape = as_size((total,) if shape is None else shape)
        if len(shape) == 0 or shape[-1] != total:
            raise ValueError(
                f"MultiOneHot: the last dim of shape must equal sum(nvec)={total}, got {tuple(shape)}."
            )
        TensorSpec.__init__(self, shape, device, to_torch_dtype(dtype, torch.bool))
        self.nvec: list[int] = nvec_l
        self.mask: torch.Tensor | None = None
        self.update_mask(mask)
        dev = self.device
        sizes = torch.tensor(nvec_l, device=dev)
        self._offsets = torch.cumsum(sizes, 0) - sizes  # first position of each group
        self._sizes = sizes
        self._group = torch.repeat_interleave(torch.arange(len(nvec_l), device=dev), sizes)
        width = max(nvec_l)
        pos = torch.arange(width, device=dev)
        self._pad = pos.unsqueeze(0) >= sizes.unsqueeze(1)  # (k, width): True where padding
        self._gather = (self._offsets.unsqueeze(1) + pos).clamp(max=total - 1)  # (k, width)

    @property
    def space(self) -> MultiCategoricalBox:  # type: ignore[override]
        """``space.nvec`` lists the group sizes."""
        return MultiCategoricalBox(tuple(self.nvec))

    @property
    def n(self) -> int:
        """``sum(nvec)``, the size of the last dim."""
        return self.shape[-1]

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Sets (or clears, with ``None``) the allowed categories, shape ``shape`` (broadcastable).

        Raises:
            ValueError: when the mask does not broadcast to ``shape`` or leaves a group
                with no allowed category.
        """
        mask = check_group_mask(mask, self.nvec, self.shape[:-1])
        self.mask = mask.to(self.device) if mask is not None else None

    def cardinality(self) -> torch.Tensor:  # type: ignore[override]
        """The number of joint values, ``prod(nvec)``."""
        return torch.as_tensor(self.nvec).prod()

    def to_categorical_spec(self) -> TensorSpec:
        """The :class:`MultiCategorical` of the same groups, shape ``(*shape[:-1], len(nvec))``.

        Example:
            >>> MultiOneHot([2, 3]).to_categorical_spec().shape
            torch.Size([2])
        """
        shape = (*self.shape[:-1], len(self.nvec))
        return MultiCategorical(self.nvec, shape, self.device, mask=self.mask)

    def to_categorical(self, val: torch.Tensor) -> torch.Tensor:
        """The index of the hot entry of each group, shape ``(*lead, len(nvec))``."""
        return self._indices(val)

    def to_one_hot_spec(self) -> MultiOneHot:
        """The spec itself (it is already one-hot)."""
        return self

    def _from_indices(self, idx: torch.Tensor) -> torch.Tensor:
        """Concatenated one-hots from per-group indices of shape ``(*lead, k)``."""
        lead = idx.shape[:-1]
        out = torch.zeros(*lead, self.shape[-1], dtype=self.dtype, device=self.device)
        return out.scatter_(-1, idx + self._offsets, 1)

    def _indices(self, val: torch.Tensor) -> torch.Tensor:
        """Per-group argmax of ``val`` (shape ``(*lead, k)``)."""
        v = val if val.dtype.is_floating_point else val.to(torch.float32)
        grouped = v[..., self._gather].masked_fill(self._pad, -float("inf"))
        return grouped.argmax(-1)

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """One uniform category per group, ``shape`` prepended."""
        lead = self._full_shape(shape)[:-1]
        if self.mask is not None:
            allowed = grouped(self.mask, self.nvec)
            return self._from_indices(masked_sample(allowed, torch.Size([*lead, len(self.nvec)])))
        r = torch.rand(*lead, len(self.nvec), dtype=torch.float64, device=self.device)
        idx = torch.minimum((r * self._sizes).floor_().long(), self._sizes - 1)
        return self._from_indices(idx)

    def _in_range(self, val: torch.Tensor) -> bool:
        if self.dtype != torch.bool and not torch.equal(val.clamp(0, 1), val):
            return False
        sums = torch.zeros(*val.shape[:-1], len(self.nvec), dtype=torch.int64, device=val.device)
        sums.index_add_(-1, self._group, val.long())
        ok = bool((sums == 1).all())
        if ok and self.mask is not None:
            ok = not bool((val.bool() & ~self.mask).any())
        return ok

    def _domain_text(self) -> str:
        extra = " on allowed categories" if self.mask is not None else ""
        return f"one one-hot vector per group of sizes {self.nvec}{extra}"

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        v = val.to(device=self.device)
        if self.mask is not None:
            v = v if v.dtype.is_floating_point else v.to(torch.float32)
            v = v.masked_fill(~self.mask.expand(v.shape), -float("inf"))
        return self._from_indices(self._indices(v))

    def encode(self, val: Any) -> torch.Tensor:
        """Concatenated one-hots from one index per group (shape ``(*lead, len(nvec))``)."""
        idx = torch.as_tensor(np.asarray(val) if not isinstance(val, torch.Tensor) else val)
        idx = idx.to(device=self.device, dtype=torch.int64)
        if idx.ndim == 0 or idx.shape[-1] != len(self.nvec):
            raise ValueError(
                f"MultiOneHot.encode takes one index per group ({len(self.nvec)} groups), got "
                f"shape {tuple(idx.shape)}."
            )
        if bool((idx < 0).any()) or bool((idx >= self._sizes).any()):
            raise ValueError(
                f"MultiOneHot.encode: indices {idx.tolist()} out of range for nvec={self.nvec}."
            )
        return self._fit_shape(self._from_indices(idx), self.shape, val)

    def to_numpy(self, val: torch.Tensor) -> np.ndarray:
        """The index of the hot entry of each group, shape ``(*lead, len(nvec))``."""
        return self._indices(val).cpu().numpy()

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """``tensor_to_index`` gathered at the hot positions: shape ``(*lead, len(nvec))``."""
        pos = self._indices(index) + self._offsets
        pos = pos.expand(*tensor_to_index.shape[:-1], pos.shape[-1])
        return tensor_to_index.gather(-1, pos)

    def enumerate(self) -> torch.Tensor:
        """Not supported (the product of the nvec may be huge)."""
        raise NotImplementedError("MultiOneHot.enumerate is not supported.")

    def _remap(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> MultiOneHot:
        mask = fn(self.mask) if self.mask is not None else None
        return MultiOneHot(self.nvec, fn(self._meta()).shape, self.device, self.dtype, mask=mask)

    def _with(self, **changes: Any) -> MultiOneHot:
        device = changes.get("device", self.device)
        mask = self.mask.to(device) if self.mask is not None else None
        return MultiOneHot(
            self.nvec, self.shape, device, changes.get("dtype", self.dtype), mask=mask
        )

    def _same_params(self, other: TensorSpec) -> bool:
        o: MultiOneHot = other  # type: ignore[assignment]
        if self.nvec != o.nvec or (self.mask is None) != (o.mask is None):
            return False
        return self.mask is None or torch.equal(self.mask, o.mask.to(self.device))

    def _repr_fields(self) -> list[str]:
        fields = [f"nvec={self.nvec}"]
        if self.mask is not None:
            fields.append(f"mask=Tensor(shape={self.mask.shape})")
        return fields
