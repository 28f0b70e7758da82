"""Element-wise reward (and value) maps: ``RewardScaling``, ``RewardClipping``,
``BinarizeReward``, ``SignTransform``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rl_envs.transforms._utils import NestedKey, unbounded_like
from rl_envs.transforms.transform import Transform


class RewardScaling(Transform):
    """Affine map of rewards: ``r * scale + loc``, or ``(r - loc) / scale``.

    Args:
        loc: offset.
        scale: scale.
        in_keys: rewards (default ``["reward"]``).
        out_keys: destinations (default ``in_keys``).
        standard_normal: use ``(r - loc) / scale`` instead of ``r * scale + loc``.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> RewardScaling(loc=1.0, scale=2.0)(TensorDict(reward=torch.tensor([3.0])))["reward"]
        tensor([7.])
    """

    def __init__(
        self,
        loc: float | torch.Tensor,
        scale: float | torch.Tensor,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        standard_normal: bool = False,
    ) -> None:
        super().__init__(in_keys if in_keys is not None else ["reward"], out_keys)
        self.register_buffer("loc", torch.as_tensor(loc, dtype=torch.get_default_dtype()))
        self.register_buffer("scale", torch.as_tensor(scale, dtype=torch.get_default_dtype()))
        self.standard_normal = standard_normal

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        if self.standard_normal:
            return (x - self.loc) / self.scale
        return x * self.scale + self.loc

    def transform_leaf_spec(self, spec: Any) -> Any:
        return unbounded_like(
            spec, dtype=spec.dtype if spec.dtype.is_floating_point else torch.float32
        )


class RewardClipping(Transform):
    """Clamps rewards into ``[clamp_min, clamp_max]`` (either bound may be ``None``).

    Args:
        clamp_min: lower bound.
        clamp_max: upper bound.
        in_keys: rewards (default ``["reward"]``).
        out_keys: destinations (default ``in_keys``).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = RewardClipping(-1.0, 1.0)
        >>> t(TensorDict(reward=torch.tensor([-3.0, 0.5, 2.0])))["reward"]
        tensor([-1.0000,  0.5000,  1.0000])
    """

    def __init__(
        self,
        clamp_min: float | None = None,
        clamp_max: float | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        if clamp_min is not None and clamp_max is not None and clamp_min > clamp_max:
            raise ValueError(f"RewardClipping: clamp_min {clamp_min} > clamp_max {clamp_max}.")
        super().__init__(in_keys if in_keys is not None else ["reward"], out_keys)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.clamp(self.clamp_min, self.clamp_max)

    def transform_leaf_spec(self, spec: Any) -> Any:
        from rl_envs.specs import Bounded

        if self.clamp_min is not None and self.clamp_max is not None:
            return Bounded(
                low=self.clamp_min,
                high=self.clamp_max,
                shape=spec.shape,
                device=spec.device,
                dtype=spec.dtype,
            )
        return spec


class BinarizeReward(Transform):
    """Maps rewards to ``1`` if positive else ``0`` (int8).

    Args:
        in_keys: rewards (default ``["reward"]``).
        out_keys: destinations (default ``in_keys``).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> BinarizeReward()(TensorDict(reward=torch.tensor([-1.0, 0.0, 2.0])))["reward"]
        tensor([0, 0, 1], dtype=torch.int8)
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys if in_keys is not None else ["reward"], out_keys)

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return (x > 0).to(torch.int8)

    def transform_leaf_spec(self, spec: Any) -> Any:
        from rl_envs.specs import Binary

        return Binary(shape=spec.shape, device=spec.device, dtype=torch.int8)


class SignTransform(Transform):
    """The sign (-1, 0 or 1) of entries, on outputs and (``in_keys_inv``) on inputs.

    Args:
        in_keys, out_keys: outputs to map.
        in_keys_inv, out_keys_inv: inputs to map on the way in.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> SignTransform(in_keys=["reward"])(TensorDict(reward=torch.tensor([-3.0, 0.0, 2.0])))["reward"]
        tensor([-1.,  0.,  1.])
    """

    invertible = True

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.sign()

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.sign()

    def transform_leaf_spec(self, spec: Any) -> Any:
        from rl_envs.specs import Bounded

        return Bounded(low=-1, high=1, shape=spec.shape, device=spec.device, dtype=spec.dtype)

    transform_leaf_spec_inv = transform_leaf_spec
