"""``OneHot``: one-hot vectors over ``n`` categories on the last dim."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rl_envs.specs import _registry
from rl_envs.specs._base import ShapeLike, TensorSpec, as_size
from rl_envs.specs._dtypes import to_torch_dtype
from rl_envs.specs._mask import check_mask, masked_sample
from rl_envs.specs._spaces import CategoricalBox
from rl_envs.specs.categorical import Categorical

__all__ = ["OneHot"]


@_registry.register
class OneHot(TensorSpec):
    """One-hot vectors: the last dim has size ``n`` and exactly one non-zero entry, equal to 1.

    Args:
        n: the number of categories (the size of the last dim).
        shape: the full shape; defaults to ``(n,)``; its last dim must be ``n``.
        device: defaults to CPU.
        dtype: defaults to ``torch.bool``.
        mask: optional bool tensor of ``shape`` (broadcastable): ``True`` marks
            the allowed categories; see :meth:`update_mask`.

    ``encode`` takes category indices (as a Gymnasium ``Discrete`` space gives
    them) and returns one-hot vectors; ``to_numpy`` goes back to indices.
    ``project`` returns the nearest one-hot vector, i.e. the one-hot of the
    argmax (among allowed categories).

    Example:
        >>> import torch
        >>> spec = OneHot(3)
        >>> spec.encode(2)
        tensor([False, False,  True])
        >>> spec.project(torch.tensor([0.1, 0.7, 0.2]))
        tensor([False,  True, False])
        >>> int(spec.to_numpy(spec.encode(1)))
        1
    """

    _domain_dims = 1

    def __init__(
        self,
        n: int,
        shape: ShapeLike | None = None,
        device: Any = None,
        dtype: Any = torch.bool,
        mask: torch.Tensor | None = None,
    ) -> None:
        n = int(n)
        shape = as_size((n,) if shape is None else shape)
        if len(shape) == 0 or shape[-1] != n:
            raise ValueError(
                f"OneHot: the last dim of shape must equal n={n}, got shape {tuple(shape)}."
            )
        if n < 1:
            raise ValueError(f"OneHot needs n >= 1 categories, got n={n}.")
        super().__init__(shape, device, to_torch_dtype(dtype, torch.bool))
        self.space = CategoricalBox(n)
        self.mask = check_mask(mask, shape[:-1], n)
        if self.mask is not None:
            self.mask = self.mask.to(self.device)
        # rows of the identity: one_hot(i) == _eye[i], one gather instead of one_hot + cast
        self._eye = torch.eye(n, device=self.device).to(self.dtype)

    @property
    def n(self) -> int:
        """The number of categories."""
        return self.space.n

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Sets (or clears, with ``None``) the mask of allowed categories, shape ``shape``."""
        self.mask = check_mask(mask, self.shape[:-1], self.space.n)
        if self.mask is not None:
            self.mask = self.mask.to(self.device)

    def _one_hot(self, idx: torch.Tensor) -> torch.Tensor:
        return self._eye[idx]

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Uniform one-hot vectors (among allowed categories), ``shape`` prepended."""
        lead = self._full_shape(shape)[:-1]
        if self.mask is not None:
            idx = masked_sample(self.mask, lead)
        else:
            idx = torch.randint(0, self.space.n, lead, device=self.device)
        return self._one_hot(idx)

    def _in_range(self, val: torch.Tensor) -> bool:
        if self.dtype == torch.bool:
            ok = bool((val.sum(-1) == 1).all())
        else:
            ok = torch.equal(val.clamp(0, 1), val) and bool((val.sum(-1) == 1).all())
        if ok and self.mask is not None:
            ok = bool((val.bool() & self.mask).any(-1).all())
        return ok

    def _domain_text(self) -> str:
        extra = " on an allowed category" if self.mask is not None else ""
        return f"one-hot vectors of size {self.space.n}{extra}"

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        v = val.to(device=self.device)
        v = v.to(torch.float32) if not v.dtype.is_floating_point else v
        if self.mask is not None:
            v = v.masked_fill(~self.mask.expand(v.shape), -float("inf"))
        return self._one_hot(v.argmax(-1))

    def encode(self, val: Any) -> torch.Tensor:
        """One-hot vectors from category indices (numpy, python int or tensor).

        Raises:
            ValueError: when an index is outside ``[0, n-1]``.
        """
        n = self.space.n
        if isinstance(val, (int, np.integer)) and not isinstance(val, bool):
            if not 0 <= val < n:
                self._bad_index(val)
            out = self._eye[int(val)].clone()
        else:
            if isinstance(val, torch.Tensor):
                idx = val.to(device=self.device, dtype=torch.int64)
            else:
                idx = torch.from_numpy(np.array(val, dtype=np.int64))
            if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= n):
                self._bad_index(idx.tolist())
            out = self._eye[idx.to(self.device)]
        return self._fit_shape(out, self.shape, val)

    def cardinality(self) -> int:
        """The number of categories ``n``."""
        return self.space.n

    def to_categorical_spec(self) -> TensorSpec:
        """The :class:`Categorical` spec of the same categories (mask kept), shape ``shape[:-1]``.

        Example:
            >>> OneHot(3, shape=(2, 3)).to_categorical_spec().shape
            torch.Size([2])
        """
        return Categorical(self.space.n, self.shape[:-1], device=self.device, mask=self.mask)

    def to_categorical(self, val: torch.Tensor) -> torch.Tensor:
        """The category indices of one-hot values (argmax over the last dim)."""
        return val.long().argmax(-1)

    def to_one_hot_spec(self) -> OneHot:
        """The spec itself (it is already one-hot)."""
        return self

    def _bad_index(self, got: Any) -> None:
        raise ValueError(
            f"OneHot.encode: category indices must be in [0, {self.space.n - 1}], got {got}. "
            f"encode takes indices, not one-hot vectors."
        )

    def to_numpy(self, val: torch.Tensor) -> np.ndarray:
        """The category indices (argmax over the last dim) as a numpy array."""
        return val.long().argmax(-1).cpu().numpy()

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """``tensor_to_index[..., i]`` keeping the last dim, where ``i`` is the hot index of ``index``.

        Example:
            >>> import torch
            >>> OneHot(3).index(OneHot(3).encode(1), torch.tensor([1.0, 2.0, 3.0]))
            tensor([2.])
        """
        idx = index.long().argmax(-1, keepdim=True)
        idx = idx.expand(*tensor_to_index.shape[:-1], 1)
        return tensor_to_index.gather(-1, idx)

    def enumerate(self) -> torch.Tensor:
        """All the one-hot values stacked on a new first dim (``n`` of them)."""
        n = self.space.n
        eye = torch.eye(n, device=self.device).to(self.dtype)
        return eye.view(n, *([1] * (self.ndim - 1)), n).expand(n, *self.shape).clone()

    def _remap(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> OneHot:
        mask = fn(self.mask) if self.mask is not None else None
        shape = fn(self._meta()).shape
        return OneHot(self.space.n, shape, self.device, self.dtype, mask=mask)

    def _with(self, **changes: Any) -> OneHot:
        device = changes.get("device", self.device)
        mask = self.mask.to(device) if self.mask is not None else None
        return OneHot(self.space.n, self.shape, device, changes.get("dtype", self.dtype), mask=mask)

    def _same_params(self, other: TensorSpec) -> bool:
        o: OneHot = other  # type: ignore[assignment]
        if self.space != o.space or (self.mask is None) != (o.mask is None):
            return False
        return self.mask is None or torch.equal(self.mask, o.mask)

    def _repr_fields(self) -> list[str]:
        fields = [f"space=CategoricalBox(n={self.space.n})"]
        if self.mask is not None:
            fields.append(f"mask=Tensor(shape={self.mask.shape})")
        return fields
