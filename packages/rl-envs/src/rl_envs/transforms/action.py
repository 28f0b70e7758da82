"""``FlattenAction``: a policy writes a flat action, the env reads its own shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rl_envs.transforms._utils import NestedKey, reshaped_spec
from rl_envs.transforms.transform import EnvSpecs, Transform


class FlattenAction(Transform):
    """The outer action is flat; the inverse reshapes it to the env's action shape.

    Dims ``first_dim .. last_dim`` (negative, feature dims) of the env's action
    are flattened in the outer spec.

    Args:
        first_dim: first feature dim to flatten (default -2).
        last_dim: last feature dim to flatten (default -1).
        in_keys_inv: the env's action keys (default ``["action"]``).
        out_keys_inv: outer names (default ``in_keys_inv``).
        in_keys, out_keys: outputs to flatten (default none).
        allow_positive_dim: accept non-negative dims.
        action_shape: the env's action feature shape, needed outside an env.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = FlattenAction(action_shape=(2, 3))
        >>> t.inv(TensorDict(action=torch.zeros(6)))["action"].shape
        torch.Size([2, 3])
    """

    invertible = True

    def __init__(
        self,
        first_dim: int = -2,
        last_dim: int = -1,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        allow_positive_dim: bool = False,
        *,
        action_shape: Sequence[int] | None = None,
    ) -> None:
        if (first_dim >= 0 or last_dim >= 0) and not allow_positive_dim:
            raise ValueError("FlattenAction: use negative dims or allow_positive_dim=True.")
        super().__init__(
            in_keys, out_keys, in_keys_inv if in_keys_inv is not None else ["action"], out_keys_inv
        )
        self.first_dim = first_dim
        self.last_dim = last_dim
        self.action_shape = tuple(action_shape) if action_shape is not None else None

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        if self.action_shape is None:
            raise RuntimeError("FlattenAction needs action_shape= outside an env.")
        flat_feature_dims = len(self.action_shape) - (self.last_dim - self.first_dim)
        lead = x.shape[: x.ndim - flat_feature_dims]
        return x.reshape(*lead, *self.action_shape)

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(self.first_dim, self.last_dim)

    def transform_leaf_spec_inv(self, spec: Any) -> Any:
        return reshaped_spec(spec, lambda t: t.flatten(self.first_dim, self.last_dim))

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        batch_dims = specs.action.ndim
        for key in self.in_keys_inv:
            if key in set(specs.action.keys(True, True)):
                self.action_shape = tuple(specs.action[key].shape[batch_dims:])
        specs.action = self._map_specs_inv(specs.action)
        return specs
