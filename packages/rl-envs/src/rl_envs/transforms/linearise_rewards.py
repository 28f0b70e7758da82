"""``LineariseRewards``: a weighted sum turns a multi-objective reward into a scalar one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import Transform


class LineariseRewards(Transform):
    """Writes ``(weights * reward).sum(-1, keepdim=True)`` for each multi-objective reward.

    The same weights apply to every ``in_key``. The reward spec becomes ``[*B, 1]``:
    unbounded stays unbounded; a bounded one gets the bounds of the weighted sum
    (positive weights take the low/high ends, negative ones the opposite).

    Args:
        in_keys: the multi-objective rewards (last dim = objectives).
        out_keys: destinations (default ``in_keys``).
        weights: one weight per objective (default all ones), a 1-d sequence or tensor.

    Raises:
        ValueError: weights that are not 1-d, or whose number differs from the rewards'.
        NotImplementedError: a reward spec with a discrete dtype.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = LineariseRewards(in_keys=["reward"], weights=[1.0, -2.0])
        >>> t(TensorDict(reward=torch.tensor([3.0, 1.0])))["reward"]
        tensor([1.])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey] | None = None,
        *,
        weights: Sequence[float] | torch.Tensor | None = None,
    ) -> None:
        super().__init__(in_keys, out_keys)
        if weights is not None:
            weights = torch.as_tensor(weights)
            if weights.ndim >= 2:
                raise ValueError(
                    f"LineariseRewards: expected 1-d weights, got {weights.ndim} dimensions."
                )
        self.register_buffer("weights", weights)

    def _weights_for(self, n: int, like: torch.Tensor) -> torch.Tensor:
        if self.weights is None:
            return torch.ones(n, dtype=like.dtype, device=like.device)
        if self.weights.numel() != n:
            raise ValueError(
                f"LineariseRewards: the number of rewards and weights should match. Got: {n} "
                f"rewards and {self.weights.numel()} weights."
            )
        return self.weights.to(dtype=like.dtype, device=like.device)

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        if self.weights is None:
            return reward.sum(dim=-1, keepdim=True)
        return (self._weights_for(reward.shape[-1], reward) * reward).sum(dim=-1, keepdim=True)

    def transform_leaf_spec(self, spec: Any) -> Any:
        from rl_envs.specs import Bounded, Unbounded

        if not spec.dtype.is_floating_point:
            raise NotImplementedError(
                "LineariseRewards: aggregating rewards that take discrete values is not supported."
            )
        *batch, n = spec.shape
        w = self._weights_for(n, torch.zeros((), dtype=spec.dtype, device=spec.device))
        shape = (*batch, 1)
        if not isinstance(spec, Bounded):
            return Unbounded(shape=shape, device=spec.device, dtype=spec.dtype)
        low, high = spec.space.low, spec.space.high
        wp, wn = w.clamp(min=0), w.clamp(max=0)
        new_low = (wp * low).sum(-1, keepdim=True) + (wn * high).sum(-1, keepdim=True)
        new_high = (wp * high).sum(-1, keepdim=True) + (wn * low).sum(-1, keepdim=True)
        return Bounded(new_low, new_high, shape=shape, device=spec.device, dtype=spec.dtype)
