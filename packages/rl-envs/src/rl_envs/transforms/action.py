"""Action maps: ``ActionScaling`` (normalised actions), ``FlattenAction``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rl_envs.transforms._utils import NestedKey, reshaped_spec
from rl_envs.transforms.transform import EnvSpecs, Transform


class ActionScaling(Transform):
    """Lets a policy act in ``[-1, 1]`` while the env reads ``[low, high]``.

    The inverse (applied to the policy's action before the env reads it) is
    ``a_env = a * scale + loc``; by default ``loc = (high + low) / 2`` and
    ``scale = (high - low) / 2`` come from the env's Bounded action spec, and
    the outer action spec becomes ``Bounded(-1, 1)``. On outputs (``in_keys``,
    e.g. a logged ``"action"``) the forward map ``(a - loc) / scale`` applies.

    Args:
        in_keys_inv: the env's action keys (default ``["action"]``).
        out_keys_inv: the outer names (default ``in_keys_inv``).
        in_keys, out_keys: outputs to normalise (default none).
        loc, scale: explicit offset and scale (default: from the spec).
        standard_normal: ``True``: outer actions are ``(a_env - loc) / scale``.
            ``False``: outer actions are ``a_env * scale + loc`` (the inverse map).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ActionScaling(loc=1.0, scale=2.0)
        >>> t.inv(TensorDict(action=torch.tensor([0.5])))["action"]
        tensor([2.])
    """

    invertible = True

    def __init__(
        self,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        *,
        loc: torch.Tensor | float | None = None,
        scale: torch.Tensor | float | None = None,
        standard_normal: bool = True,
    ) -> None:
        super().__init__(
            in_keys, out_keys, in_keys_inv if in_keys_inv is not None else ["action"], out_keys_inv
        )
        self.standard_normal = standard_normal
        self.register_buffer(
            "loc", None if loc is None else torch.as_tensor(loc, dtype=torch.float32)
        )
        self.register_buffer(
            "scale", None if scale is None else torch.as_tensor(scale, dtype=torch.float32)
        )

    def _check(self) -> None:
        if self.loc is None or self.scale is None:
            raise RuntimeError(
                "ActionScaling has no loc/scale: pass them, or put it in a TransformedEnv "
                "whose action spec is Bounded."
            )

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        self._check()
        if self.standard_normal:
            return (x * self.scale + self.loc).to(x.dtype)
        return ((x - self.loc) / self.scale).to(x.dtype)

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        self._check()
        if self.standard_normal:
            return ((x - self.loc) / self.scale).to(x.dtype)
        return (x * self.scale + self.loc).to(x.dtype)

    def transform_leaf_spec_inv(self, spec: Any) -> Any:
        from rl_envs.specs import Bounded

        if not isinstance(spec, Bounded):
            raise TypeError(
                f"ActionScaling needs a Bounded action spec, got {type(spec).__name__}."
            )
        low, high = spec.space.low, spec.space.high
        if self.loc is None:
            self.loc = ((high + low) / 2).to(torch.float32)
        if self.scale is None:
            self.scale = ((high - low) / 2).to(torch.float32)
        new_low, new_high = self._apply_transform(low), self._apply_transform(high)
        return Bounded(
            low=torch.minimum(new_low, new_high),
            high=torch.maximum(new_low, new_high),
            shape=spec.shape,
            device=spec.device,
            dtype=spec.dtype,
        )

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        specs.action = self._map_specs_inv(specs.action)
        return specs


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
