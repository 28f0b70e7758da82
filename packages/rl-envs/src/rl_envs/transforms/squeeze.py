"""``SqueezeTransform``: removes a dim of size one (and re-inserts it on the way in)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rl_envs.transforms._utils import NestedKey, reshaped_spec
from rl_envs.transforms.shape import UnsqueezeTransform


class SqueezeTransform(UnsqueezeTransform):
    """The reverse of :class:`UnsqueezeTransform`: squeezes ``dim`` of outputs, unsqueezes inputs.

    Args:
        dim: the size-one dim to remove; negative (feature dims) unless ``allow_positive_dim``.
        allow_positive_dim: accept ``dim >= 0`` (counted from the first batch dim).
        in_keys, out_keys: outputs to squeeze.
        in_keys_inv, out_keys_inv: inputs to unsqueeze on the way in.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = SqueezeTransform(-1, in_keys=["obs"])
        >>> t(TensorDict(obs=torch.zeros(3, 1)))["obs"].shape
        torch.Size([3])
    """

    def __init__(
        self,
        dim: int | None = None,
        *,
        allow_positive_dim: bool = False,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(
            dim,
            allow_positive_dim=allow_positive_dim,
            in_keys=in_keys,
            out_keys=out_keys,
            in_keys_inv=in_keys_inv,
            out_keys_inv=out_keys_inv,
        )

    @property
    def squeeze_dim(self) -> int:
        """The squeezed dim (TorchRL's older name)."""
        return self.dim

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.squeeze(self.dim)

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.unsqueeze(self.dim)

    def transform_leaf_spec(self, spec: Any) -> Any:
        return reshaped_spec(spec, lambda t: t.squeeze(self.dim))

    def transform_leaf_spec_inv(self, spec: Any) -> Any:
        return reshaped_spec(spec, lambda t: t.squeeze(self.dim))
