"""``ClipTransform``: clamps entries (outputs and/or inputs) to ``[low, high]``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import Transform


def _scalar(name: str, val: Any) -> torch.Tensor | None:
    if val is None:
        return None
    if (isinstance(val, torch.Tensor) and val.numel() > 1) or (
        isinstance(val, np.ndarray) and val.size > 1
    ):
        raise TypeError(
            f"ClipTransform: low and high must be scalars or None ({name} is {val!r}): pass "
            "one float bound for every element."
        )
    t = torch.as_tensor(val)
    return t if t.dtype.is_floating_point else t.to(torch.get_default_dtype())


class ClipTransform(Transform):
    """Clamps ``in_keys`` (outputs) and ``in_keys_inv`` (inputs, e.g. actions) to ``[low, high]``.

    One ``low``/``high`` pair per transform (chain several for several ranges). The
    specs of the clipped outputs become :class:`~rl_envs.Bounded`; as in TorchRL the
    bounds are widened by the dtype's resolution, and a missing bound is the dtype's
    largest finite value.

    Args:
        in_keys, out_keys: outputs to clip (observations, rewards).
        in_keys_inv, out_keys_inv: inputs to clip on the way in.
        low: lower bound (a scalar) or ``None``.
        high: upper bound (a scalar) or ``None``; at least one of them is needed.

    Raises:
        TypeError: neither bound given, or a bound that is not a scalar.
        ValueError: ``low >= high``.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ClipTransform(in_keys=["obs"], low=-1, high=0.1)
        >>> t(TensorDict(obs=torch.tensor([-3.0, 0.0, 3.0])))["obs"]
        tensor([-1.0000,  0.0000,  0.1000])
    """

    invertible = True

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        *,
        low: Any = None,
        high: Any = None,
    ) -> None:
        if low is None and high is None:
            raise TypeError(
                "ClipTransform: Either one or both of `high` and `low` must be provided."
            )
        low_t, high_t = _scalar("low", low), _scalar("high", high)
        if low_t is not None and high_t is not None and bool(low_t >= high_t):
            raise ValueError(
                f"ClipTransform: `low` must be strictly lower than `high`, got {low}, {high}."
            )
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.register_buffer("low", low_t)
        self.register_buffer("high", high_t)

    def _clip(self, x: torch.Tensor) -> torch.Tensor:
        if self.low is None:
            return x.clamp_max(self.high.item())
        if self.high is None:
            return x.clamp_min(self.low.item())
        return x.clamp(self.low.item(), self.high.item())

    _apply_transform = _clip
    _inv_apply_transform = _clip

    def transform_leaf_spec(self, spec: Any) -> Any:
        from rl_envs.specs import Bounded

        dtype = spec.dtype if spec.dtype.is_floating_point else torch.get_default_dtype()
        info = torch.finfo(dtype)
        low = self.low.item() - info.resolution if self.low is not None else -info.max
        high = self.high.item() + info.resolution if self.high is not None else info.max
        return Bounded(low, high, shape=spec.shape, device=spec.device, dtype=spec.dtype)
