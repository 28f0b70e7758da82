"""``PermuteTransform``: reorders the trailing (feature) dims of entries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rl_envs.transforms._utils import NestedKey, reshaped_spec
from rl_envs.transforms.transform import Transform


def _permute_tail(x: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    n, nd = len(dims), x.ndim
    return x.permute(*range(nd - n), *(nd + d for d in dims))


class PermuteTransform(Transform):
    """Permutes the last ``len(dims)`` dims of outputs (and undoes it on inputs).

    Args:
        dims: the new order of the trailing dims, a reordering of
            ``[-len(dims), ..., -1]`` (e.g. ``(-1, -3, -2)`` moves channels first).
        in_keys, out_keys: outputs to permute.
        in_keys_inv, out_keys_inv: inputs to permute back on the way in.

    Raises:
        ValueError: ``dims`` is not a reordering of the trailing negative dims.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = PermuteTransform((-1, -3, -2), in_keys=["pixels"])
        >>> t(TensorDict(pixels=torch.zeros(84, 84, 3)))["pixels"].shape
        torch.Size([3, 84, 84])
    """

    invertible = True

    def __init__(
        self,
        dims: Sequence[int],
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
    ) -> None:
        dims = [int(d) for d in dims]
        if sorted(dims) != list(range(-len(dims), 0)):
            raise ValueError(
                f"PermuteTransform: dims must reorder the trailing dims {list(range(-len(dims), 0))} "
                f"(negative indices only), got {dims}."
            )
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.dims = dims
        n = len(dims)
        inverse = [0] * n
        for pos, d in enumerate(dims):
            inverse[d + n] = pos - n
        self._inverse = inverse

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return _permute_tail(x, self.dims)

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return _permute_tail(x, self._inverse)

    def transform_leaf_spec(self, spec: Any) -> Any:
        return reshaped_spec(spec, lambda t: _permute_tail(t, self.dims))

    def transform_leaf_spec_inv(self, spec: Any) -> Any:
        return reshaped_spec(spec, lambda t: _permute_tail(t, self.dims))
