"""``MultiCategorical``: one categorical per entry of the last dim (a Gymnasium ``MultiDiscrete``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rl_envs.specs import _registry
from rl_envs.specs._base import ShapeLike, TensorSpec, as_size
from rl_envs.specs._dtypes import to_torch_dtype
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

    ``spec.nvec`` is ``nvec`` expanded to ``shape``; ``spec.space.nvec`` too.

    Example:
        >>> import torch
        >>> spec = MultiCategorical([3, 2])
        >>> spec.is_in(torch.tensor([2, 1])), spec.is_in(torch.tensor([2, 2]))
        (True, False)
        >>> spec.project(torch.tensor([5, -1]))
        tensor([2, 0])
    """

    _domain_dims = 1

    def __init__(
        self,
        nvec: Any,
        shape: ShapeLike | None = None,
        device: Any = None,
        dtype: Any = torch.int64,
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
        self.mask = None
        self._high = (self.nvec - 1).to(self.dtype) if self.dtype != torch.bool else None
        self._zeros = torch.zeros_like(self._high) if self._high is not None else None
        first = int(self.nvec.reshape(-1)[0])
        self._same_n = first if bool((self.nvec == first).all()) else None

    @property
    def n(self) -> int:  # type: ignore[override]
        """The total number of categories, ``nvec.sum()`` over the last dim of the first entry."""
        return int(self.nvec.reshape(-1, self.nvec.shape[-1])[0].sum())

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Masks are not supported by MultiCategorical."""
        raise NotImplementedError(
            "MultiCategorical does not support masks; use Categorical or OneHot."
        )

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Uniform categories per entry, ``shape`` prepended."""
        full = self._full_shape(shape)
        if self._same_n is not None:
            out = torch.randint(0, self._same_n, full, device=self.device)
        else:
            r = torch.rand(full, dtype=torch.float64, device=self.device)
            out = (r * self.nvec).floor_().long()
            out = torch.minimum(out, self.nvec - 1)
        return out.to(self.dtype)

    def _in_range(self, val: torch.Tensor) -> bool:
        if self._high is None:
            return bool((val.long() < self.nvec).all())
        return torch.equal(torch.clamp(val, self._zeros, self._high), val)

    def _domain_text(self) -> str:
        return f"integers in [0, nvec-1] with nvec={self.nvec.reshape(-1, self.nvec.shape[-1])[0].tolist()}"

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if val.dtype.is_floating_point:
            val = val.round()
        val = val.to(device=self.device)
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
        return _registry.lookup("MultiOneHot")(nvec, (*self.shape[:-1], sum(nvec)), self.device)

    def to_one_hot(self, val: torch.Tensor) -> torch.Tensor:
        """Concatenated one-hot vectors of a value of this spec."""
        return self.to_one_hot_spec()._from_indices(val.long())  # type: ignore[attr-defined]

    def _remap(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> MultiCategorical:
        nvec = fn(self.nvec)
        return MultiCategorical(nvec, nvec.shape, self.device, self.dtype)

    def _with(self, **changes: Any) -> MultiCategorical:
        device = changes.get("device", self.device)
        return MultiCategorical(
            self.nvec.to(device), self.shape, device, changes.get("dtype", self.dtype)
        )

    def _same_params(self, other: TensorSpec) -> bool:
        return torch.equal(self.nvec, other.nvec.to(self.device))  # type: ignore[attr-defined]

    def _repr_fields(self) -> list[str]:
        nv = self.nvec.reshape(-1, self.nvec.shape[-1])
        same = bool((nv == nv[0]).all())
        shown = nv[0].tolist() if same else f"Tensor(shape={self.nvec.shape})"
        return [f"nvec={shown}"]
