"""``MultiCategorical``: one categorical per entry of the last dim (a Gymnasium ``MultiDiscrete``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rl_envs.specs import _registry
from rl_envs.specs._base import ShapeLike, TensorSpec, as_size
from rl_envs.specs._dtypes import to_torch_dtype
from rl_envs.specs._group_mask import check_group_mask, grouped
from rl_envs.specs._mask import masked_sample
from rl_envs.specs._spaces import MultiCategoricalBox
from rl_envs.specs.categorical import Categorical

__all__ = ["MultiCategorical"]


class MultiCategorical(Categorical):
    """Integer vectors where entry ``i`` is a category in ``0 .. nvec[i]-1``.

    Args:
        nvec: the number of categories of each entry; a sequence or tensor whose
            shape is the trailing part of ``shape`` (it is broadcast to ``shape``).
        shape: the full shape; defaults to ``nvec``'s shape.
        device: defaults to CPU.
        dtype: defaults to ``torch.int64``.
        mask: optional bool tensor of shape ``(*shape[:-1], sum(nvec))`` (broadcastable),
            laid out like the equivalent one-hot value: ``True`` marks the allowed
            categories of each group. ``rand`` samples only allowed ones, ``is_in``
            rejects the others, ``project`` moves each entry to the nearest allowed
            category. Change it with :meth:`update_mask`.

    ``spec.nvec`` is ``nvec`` expanded to ``shape``; ``spec.space.nvec`` too.

    Example:
        >>> import torch
        >>> spec = MultiCategorical([3, 2])
        >>> spec.is_in(torch.tensor([2, 1])), spec.is_in(torch.tensor([2, 2]))
        (True, False)
        >>> spec.project(torch.tensor([5, -1]))
        tensor([2, 0])
        >>> masked = MultiCategorical([3, 2], mask=torch.tensor([True, False, False, False, True]))
        >>> masked.rand()
        tensor([0, 1])
    """

    _domain_dims = 1

    def __init__(
        self,
        nvec: Any,
        shape: ShapeLike | None = None,
        device: Any = None,
        dtype: Any = torch.int64,
        mask: torch.Tensor | None = None,
    ) -> None:
        nvec_t = torch.as_tensor(nvec, dtype=torch.int64)
        if nvec_t.ndim == 0:
            nvec_t = nvec_t.unsqueeze(0)
        shape = nvec_t.shape if shape is None else as_size(shape)
        if len(shape) == 0:
            raise ValueError(
                "MultiCategorical needs a non-empty shape (its last dim lists the categoricals)."
            )
        try:
            nvec_t = nvec_t.expand(shape).contiguous()
        except RuntimeError as err:
            raise ValueError(
                f"MultiCategorical: nvec of shape {tuple(nvec_t.shape)} does not broadcast to "
                f"shape {tuple(shape)}."
            ) from err
        if bool((nvec_t < 1).any()):
            raise ValueError(
                f"MultiCategorical: every nvec entry must be >= 1, got {nvec_t.tolist()}."
            )
        TensorSpec.__init__(self, shape, device, to_torch_dtype(dtype, torch.int64))
        self.nvec: torch.Tensor = nvec_t.to(self.device)
        self.space = MultiCategoricalBox(self.nvec)  # type: ignore[assignment]
        self.mask: torch.Tensor | None = None
        self.update_mask(mask)
        self._high = (self.nvec - 1).to(self.dtype) if self.dtype != torch.bool else None
        self._zeros = torch.zeros_like(self._high) if self._high is not None else None
        first = int(self.nvec.reshape(-1)[0])
        self._same_n = first if bool((self.nvec == first).all()) else None

    @property
    def n(self) -> int:  # type: ignore[override]
        """The total number of categories, ``nvec.sum()`` over the last dim of the first entry."""
        return int(self.nvec.reshape(-1, self.nvec.shape[-1])[0].sum())

    def _row_nvec(self) -> list[int]:
        return self.nvec.reshape(-1, self.nvec.shape[-1])[0].tolist()

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Sets (or clears, with ``None``) the allowed categories, shape ``(*shape[:-1], sum(nvec))``.

        Raises:
            ValueError: when the mask does not broadcast to that shape, leaves a group
                with no allowed category, or ``nvec`` differs between leading entries.
        """
        if mask is not None:
            rows = self.nvec.reshape(-1, self.nvec.shape[-1])
            if not bool((rows == rows[0]).all()):
                raise ValueError(
                    "MultiCategorical: a mask needs the same nvec for every leading entry; "
                    "build one spec per nvec instead."
                )
        mask = check_group_mask(mask, self._row_nvec(), self.shape[:-1])
        self.mask = mask.to(self.device) if mask is not None else None

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Uniform categories per entry, ``shape`` prepended."""
        full = self._full_shape(shape)
        if self.mask is not None:
            return masked_sample(grouped(self.mask, self._row_nvec()), full).to(self.dtype)
        if self._same_n is not None:
            out = torch.randint(0, self._same_n, full, device=self.device)
        else:
            r = torch.rand(full, dtype=torch.float64, device=self.device)
            out = (r * self.nvec).floor_().long()
            out = torch.minimum(out, self.nvec - 1)
        return out.to(self.dtype)

    def _in_range(self, val: torch.Tensor) -> bool:
        if self._high is None:
            ok = bool((val.long() < self.nvec).all())
        else:
            ok = torch.equal(torch.clamp(val, self._zeros, self._high), val)
        if ok and self.mask is not None:
            allowed = grouped(self.mask, self._row_nvec()).expand(*val.shape, -1)
            ok = bool(allowed.gather(-1, val.long().unsqueeze(-1)).all())
        return ok

    def _domain_text(self) -> str:
        extra = " allowed by the mask" if self.mask is not None else ""
        return f"integers in [0, nvec-1]{extra} with nvec={self._row_nvec()}"

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if val.dtype.is_floating_point:
            val = val.round()
        val = val.to(device=self.device)
        if self.mask is not None:
            # nearest allowed category of each group (ties go to the lower index)
            allowed = grouped(self.mask, self._row_nvec())
            cats = torch.arange(allowed.shape[-1], device=self.device, dtype=torch.float64)
            dist = (cats - val.double().unsqueeze(-1)).abs()
            dist = dist.masked_fill(~allowed.expand(*val.shape, -1), float("inf"))
            return dist.argmin(-1).to(self.dtype)
        hi = (self.nvec - 1).to(val.dtype)
        return torch.clamp(val, torch.zeros_like(hi), hi).to(self.dtype)

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Not defined for MultiCategorical (TorchRL neither offers a meaningful one)."""
        raise NotImplementedError("MultiCategorical.index is not supported.")

    def enumerate(self) -> torch.Tensor:
        """Not supported (the product of the nvec may be huge)."""
        raise NotImplementedError("MultiCategorical.enumerate is not supported.")

    def cardinality(self) -> torch.Tensor:  # type: ignore[override]
        """The number of joint values of one entry, ``prod(nvec)`` over the last dim."""
        return self.nvec.reshape(-1, self.nvec.shape[-1])[0].prod()

    def to_one_hot_spec(self) -> TensorSpec:
        """The :class:`MultiOneHot` of the same groups, shape ``(*shape[:-1], nvec.sum())``.

        Raises:
            ValueError: when ``nvec`` differs between the leading entries (one
                MultiOneHot has one list of group sizes).

        Example:
            >>> MultiCategorical([2, 3]).to_one_hot_spec().shape
            torch.Size([5])
        """
        rows = self.nvec.reshape(-1, self.nvec.shape[-1])
        if not bool((rows == rows[0]).all()):
            raise ValueError(
                "MultiCategorical.to_one_hot_spec: nvec differs between the leading entries; "
                "a MultiOneHot has one list of group sizes."
            )
        nvec = rows[0].tolist()
        return _registry.lookup("MultiOneHot")(
            nvec, (*self.shape[:-1], sum(nvec)), self.device, mask=self.mask
        )

    def to_one_hot(self, val: torch.Tensor) -> torch.Tensor:
        """Concatenated one-hot vectors of a value of this spec."""
        return self.to_one_hot_spec()._from_indices(val.long())  # type: ignore[attr-defined]

    def _remap(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> MultiCategorical:
        nvec = fn(self.nvec)
        mask = fn(self.mask) if self.mask is not None else None
        return MultiCategorical(nvec, nvec.shape, self.device, self.dtype, mask=mask)

    def _with(self, **changes: Any) -> MultiCategorical:
        device = changes.get("device", self.device)
        mask = self.mask.to(device) if self.mask is not None else None
        return MultiCategorical(
            self.nvec.to(device), self.shape, device, changes.get("dtype", self.dtype), mask=mask
        )

    def _same_params(self, other: TensorSpec) -> bool:
        o: MultiCategorical = other  # type: ignore[assignment]
        if not torch.equal(self.nvec, o.nvec.to(self.device)):
            return False
        if (self.mask is None) != (o.mask is None):
            return False
        return self.mask is None or torch.equal(self.mask, o.mask.to(self.device))

    def _repr_fields(self) -> list[str]:
        nv = self.nvec.reshape(-1, self.nvec.shape[-1])
        same = bool((nv == nv[0]).all())
        shown = nv[0].tolist() if same else f"Tensor(shape={self.nvec.shape})"
        fields = [f"nvec={shown}"]
        if self.mask is not None:
            fields.append(f"mask=Tensor(shape={self.mask.shape})")
        return fields
