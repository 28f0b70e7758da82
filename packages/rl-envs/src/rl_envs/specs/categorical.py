"""``Categorical``: integer indices ``0 .. n-1``, optionally restricted by a mask."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rl_envs.specs import _registry
from rl_envs.specs._base import ShapeLike, TensorSpec
from rl_envs.specs._dtypes import to_torch_dtype
from rl_envs.specs._mask import check_mask, masked_sample
from rl_envs.specs._spaces import CategoricalBox

__all__ = ["Categorical"]


class Categorical(TensorSpec):
    """Integer categories ``0 .. n-1`` (e.g. a Gymnasium ``Discrete`` action).

    Args:
        n: the number of categories.
        shape: the full shape of a value; defaults to ``()`` (one index).
        device: defaults to CPU.
        dtype: defaults to ``torch.int64``.
        mask: optional bool tensor of shape ``(*shape, n)`` (broadcastable):
            ``True`` marks the allowed categories. ``rand`` samples only allowed
            ones, ``is_in`` rejects the others, ``project`` moves to the nearest
            allowed index. Change it with :meth:`update_mask`.

    Example:
        >>> import torch
        >>> spec = Categorical(n=4)
        >>> int(spec.rand()) in range(4)
        True
        >>> spec.project(torch.tensor(7))
        tensor(3)
        >>> spec.is_in(torch.tensor(4))
        False
    """

    def __init__(
        self,
        n: int,
        shape: ShapeLike | None = None,
        device: Any = None,
        dtype: Any = torch.int64,
        mask: torch.Tensor | None = None,
    ) -> None:
        super().__init__(shape, device, to_torch_dtype(dtype, torch.int64))
        n = int(n)
        if n < 1:
            raise ValueError(f"Categorical needs n >= 1 categories, got n={n}.")
        self.space = CategoricalBox(n)
        self.mask = check_mask(mask, self.shape, n)
        if self.mask is not None:
            self.mask = self.mask.to(self.device)

    @property
    def n(self) -> int:
        """The number of categories."""
        return self.space.n

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Sets (or clears, with ``None``) the mask of allowed categories, shape ``(*shape, n)``."""
        self.mask = check_mask(mask, self.shape, self.space.n)
        if self.mask is not None:
            self.mask = self.mask.to(self.device)

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Uniform categories (among the allowed ones), ``shape`` prepended."""
        full = self._full_shape(shape)
        if self.mask is not None:
            return masked_sample(self.mask, full).to(self.dtype)
        if self.dtype == torch.bool:
            return torch.randint(0, self.space.n, full, device=self.device).bool()
        return torch.randint(0, self.space.n, full, dtype=self.dtype, device=self.device)

    def _in_range(self, val: torch.Tensor) -> bool:
        if self.dtype == torch.bool:
            ok = self.space.n >= 2 or not bool(val.any())
        else:
            ok = torch.equal(val.clamp(0, self.space.n - 1), val)
        if ok and self.mask is not None:
            m = self.mask.expand(*val.shape, self.space.n)
            ok = bool(m.gather(-1, val.long().unsqueeze(-1)).all())
        return ok

    def _domain_text(self) -> str:
        extra = " and allowed by the mask" if self.mask is not None else ""
        return f"integers in [0, {self.space.n - 1}]{extra}"

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        n = self.space.n
        if val.dtype.is_floating_point:
            val = val.round()
        val = val.to(device=self.device)
        if self.mask is None:
            if self.dtype == torch.bool:
                return val.clamp(0, n - 1).to(torch.bool)
            return val.clamp(0, n - 1).to(self.dtype)
        # nearest allowed category (ties go to the lower index)
        cats = torch.arange(n, device=self.device, dtype=torch.float64)
        dist = (cats - val.double().unsqueeze(-1)).abs()
        dist = dist.masked_fill(~self.mask.expand(*val.shape, n), float("inf"))
        return dist.argmin(-1).to(self.dtype)

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """``tensor_to_index[..., index]`` keeping the last dim (e.g. the chosen action value).

        Example:
            >>> import torch
            >>> Categorical(3).index(torch.tensor(2), torch.tensor([1.0, 2.0, 3.0]))
            tensor([3.])
        """
        idx = index.long()
        if idx.ndim == tensor_to_index.ndim - 1:
            idx = idx.unsqueeze(-1)
        idx = idx.expand(*tensor_to_index.shape[:-1], idx.shape[-1])
        return tensor_to_index.gather(-1, idx)

    def enumerate(self) -> torch.Tensor:
        """All the values of the spec stacked on a new first dim (``n`` of them)."""
        n = self.space.n
        cats = torch.arange(n, device=self.device).to(self.dtype)
        return cats.view(n, *([1] * self.ndim)).expand(n, *self.shape).clone()

    def cardinality(self) -> int:
        """The number of categories ``n`` (TorchRL counts one entry)."""
        return self.space.n

    def to_one_hot_spec(self) -> TensorSpec:
        """The :class:`OneHot` spec of the same categories (mask kept), shape ``(*shape, n)``.

        Example:
            >>> Categorical(3, shape=(2,)).to_one_hot_spec().shape
            torch.Size([2, 3])
        """
        n = self.space.n
        return _registry.lookup("OneHot")(
            n, shape=(*self.shape, n), device=self.device, mask=self.mask
        )

    def to_one_hot(self, val: torch.Tensor) -> torch.Tensor:
        """A value of this spec as one-hot vectors (bool, last dim ``n``)."""
        return torch.nn.functional.one_hot(val.long(), self.space.n).bool()

    def to_categorical_spec(self) -> Categorical:
        """The spec itself (it is already categorical)."""
        return self

    def _remap(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Categorical:
        mask = fn(self.mask) if self.mask is not None else None
        shape = fn(self._meta()).shape
        return Categorical(self.space.n, shape, self.device, self.dtype, mask=mask)

    def _with(self, **changes: Any) -> Categorical:
        device = changes.get("device", self.device)
        mask = self.mask.to(device) if self.mask is not None else None
        return Categorical(
            self.space.n, self.shape, device, changes.get("dtype", self.dtype), mask=mask
        )

    def _same_params(self, other: TensorSpec) -> bool:
        o: Categorical = other  # type: ignore[assignment]
        if self.space != o.space or (self.mask is None) != (o.mask is None):
            return False
        return self.mask is None or torch.equal(self.mask, o.mask)

    def _repr_fields(self) -> list[str]:
        fields = [f"space=CategoricalBox(n={self.space.n})"]
        if self.mask is not None:
            fields.append(f"mask=Tensor(shape={self.mask.shape})")
        return fields
