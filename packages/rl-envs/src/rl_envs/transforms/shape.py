"""Shape transforms: ``UnsqueezeTransform``, ``FlattenObservation``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rl_envs.transforms._utils import NestedKey, reshaped_spec
from rl_envs.transforms.transform import Transform


class UnsqueezeTransform(Transform):
    """Inserts a dim of size one (and removes it from inputs with ``in_keys_inv``).

    Args:
        dim: where to insert; negative (feature dims) unless ``allow_positive_dim``.
        allow_positive_dim: accept ``dim >= 0`` (counted from the first batch dim).
        in_keys, out_keys: outputs to unsqueeze.
        in_keys_inv, out_keys_inv: inputs to squeeze on the way in.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> UnsqueezeTransform(-1, in_keys=["obs"])(TensorDict(obs=torch.zeros(3)))["obs"].shape
        torch.Size([3, 1])
    """

    invertible = True

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
        if dim is None:
            raise TypeError("UnsqueezeTransform needs dim.")
        if dim >= 0 and not allow_positive_dim:
            raise ValueError(
                f"UnsqueezeTransform: dim={dim} counts from the batch dims; use a negative dim "
                "or allow_positive_dim=True."
            )
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.dim = dim

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.unsqueeze(self.dim)

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.squeeze(self.dim)

    def transform_leaf_spec(self, spec: Any) -> Any:
        return reshaped_spec(spec, lambda t: t.unsqueeze(self.dim))

    def transform_leaf_spec_inv(self, spec: Any) -> Any:
        return reshaped_spec(spec, lambda t: t.unsqueeze(self.dim))


class FlattenObservation(Transform):
    """Flattens dims ``first_dim .. last_dim`` (negative: feature dims) of observations.

    Args:
        first_dim: first dim to flatten.
        last_dim: last dim to flatten.
        in_keys: entries (default ``["pixels"]``).
        out_keys: destinations (default ``in_keys``).
        allow_positive_dim: accept non-negative dims.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> FlattenObservation(-3, -1, in_keys=["obs"])(TensorDict(obs=torch.zeros(2, 3, 4)))["obs"].shape
        torch.Size([24])
    """

    def __init__(
        self,
        first_dim: int,
        last_dim: int,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        allow_positive_dim: bool = False,
    ) -> None:
        if (first_dim >= 0 or last_dim >= 0) and not allow_positive_dim:
            raise ValueError(
                "FlattenObservation: dims count from the batch dims when >= 0; use negative "
                "dims or allow_positive_dim=True."
            )
        super().__init__(in_keys if in_keys is not None else ["pixels"], out_keys)
        self.first_dim = first_dim
        self.last_dim = last_dim

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(self.first_dim, self.last_dim)

    def transform_leaf_spec(self, spec: Any) -> Any:
        return reshaped_spec(spec, lambda t: t.flatten(self.first_dim, self.last_dim))
