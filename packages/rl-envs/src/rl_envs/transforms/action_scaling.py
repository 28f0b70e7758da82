"""``ActionScaling``: a policy acts in a normalised range, the env reads its own range."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, as_key_list
from rl_envs.transforms.transform import Transform


def _bounds(spec: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The finite ``(low, high)`` of a Bounded spec; RuntimeError otherwise."""
    space = getattr(spec, "space", None)
    low, high = getattr(space, "low", None), getattr(space, "high", None)
    if low is None or high is None or not spec.dtype.is_floating_point:
        raise RuntimeError(
            f"ActionScaling needs a Bounded (continuous) action spec to derive loc and scale, "
            f"got {type(spec).__name__}; pass loc= and scale= explicitly."
        )
    huge = torch.finfo(low.dtype).max
    if not (torch.isfinite(low).all() and torch.isfinite(high).all()) or bool(
        (low.abs() >= huge).any() or (high.abs() >= huge).any()
    ):
        raise RuntimeError(
            "ActionScaling needs finite action bounds (an infinite or finfo.max bound is "
            "unbounded); pass loc= and scale= explicitly."
        )
    return low, high


class ActionScaling(Transform):
    """Lets a policy act in ``[-1, 1]`` (or ``[0, 1]``) while the env reads its own range.

    On the way in, ``a_env = a * scale + loc`` (with ``standard_normal=False`` the outer
    action lives in ``[0, 1]``: ``a_env = (2a - 1) * scale + loc``). By default ``loc`` and
    ``scale`` are the centre and half-width of the env's Bounded action spec, and the outer
    action spec becomes ``Bounded(-1, 1)`` (or ``(0, 1)``); with explicit ones (e.g.
    :meth:`from_stats`) the outer spec is the env's bounds mapped through them (an
    unbounded spec stays unbounded). ``forward`` (a replay-buffer
    sample, a module chain) maps env-scale actions back to the normalised range; in an env
    the outputs are left alone.

    Args:
        in_keys_inv: the env's action key (one; default ``["action"]``; ``[]``: only
            ``forward`` normalises, which needs ``loc`` and ``scale``).
        out_keys_inv: its outer name (default ``in_keys_inv``).
        in_keys, out_keys: what ``forward`` normalises (default: the action key).
        loc, scale: explicit offset and scale, both or neither (default: from the spec).
        standard_normal: ``True``: outer range ``[-1, 1]``; ``False``: ``[0, 1]``.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ActionScaling(loc=1.0, scale=2.0)
        >>> t.inv(TensorDict(action=torch.tensor([0.5])))["action"]
        tensor([2.])
        >>> ActionScaling.from_stats(low=torch.tensor([0.0]), high=torch.tensor([4.0])).normalize(
        ...     torch.tensor([3.0])
        ... )
        tensor([0.5000])
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
        inv = as_key_list(["action"] if in_keys_inv is None else in_keys_inv)
        if len(inv) > 1:
            raise ValueError(
                "ActionScaling only supports a single action key per instance; compose several "
                "ActionScaling transforms to scale several actions."
            )
        if in_keys is None:
            in_keys = list(inv) if inv else ["action"]
        super().__init__(in_keys, out_keys, inv, out_keys_inv)
        if (loc is None) != (scale is None):
            raise ValueError("ActionScaling: loc and scale must both be given or both be None.")
        if loc is None and not inv:
            raise ValueError(
                "ActionScaling(in_keys_inv=[]) (forward-only) needs explicit loc and scale: "
                "there is no action spec to derive them from."
            )
        if scale is not None:
            scale = torch.as_tensor(scale, dtype=torch.get_default_dtype())
            if (scale == 0).any():
                raise ValueError("ActionScaling: scale must not contain zeros (division by zero).")
        self.standard_normal = bool(standard_normal)
        self._explicit = loc is not None
        self.register_buffer(
            "loc", None if loc is None else torch.as_tensor(loc, dtype=torch.get_default_dtype())
        )
        self.register_buffer("scale", scale)

    @classmethod
    def from_stats(
        cls,
        *,
        mean: torch.Tensor | None = None,
        std: torch.Tensor | None = None,
        low: torch.Tensor | None = None,
        high: torch.Tensor | None = None,
        eps: float = 1e-6,
        **kwargs: Any,
    ) -> ActionScaling:
        """From dataset statistics: ``mean`` / ``std`` (zero mean, unit std outside) or
        ``low`` / ``high`` (the range mapped to ``[-1, 1]``); the scale is floored at
        ``eps``. ``kwargs`` go to the constructor."""
        if (mean is None) != (std is None):
            raise ValueError("ActionScaling.from_stats: mean and std must be provided together.")
        if (low is None) != (high is None):
            raise ValueError("ActionScaling.from_stats: low and high must be provided together.")
        if (mean is None) == (low is None):
            raise ValueError(
                "ActionScaling.from_stats: provide exactly one of (mean, std) or (low, high)."
            )
        dtype = torch.get_default_dtype()
        if mean is not None:
            loc, scale = torch.as_tensor(mean, dtype=dtype), torch.as_tensor(std, dtype=dtype)
        else:
            low, high = torch.as_tensor(low, dtype=dtype), torch.as_tensor(high, dtype=dtype)
            loc, scale = (low + high) / 2, (high - low) / 2
        if loc.shape != scale.shape:
            raise ValueError(
                f"ActionScaling.from_stats: loc and scale must have the same shape, got "
                f"{tuple(loc.shape)} and {tuple(scale.shape)}."
            )
        return cls(loc=loc, scale=scale.clamp_min(eps), **kwargs)

    def _loc_scale(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.loc is None or self.scale is None:
            raise RuntimeError(
                "ActionScaling has no loc/scale: pass them, or put it in a TransformedEnv "
                "whose action spec is Bounded."
            )
        if self.loc.numel() > 1 and (action.ndim == 0 or action.shape[-1] != self.loc.shape[-1]):
            raise ValueError(
                f"ActionScaling: action shape {tuple(action.shape)} does not match the loc/scale "
                f"dimension {self.loc.shape[-1]} on its last dim."
            )
        return self.loc.to(action.device), self.scale.to(action.device)

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        loc, scale = self._loc_scale(x)
        out = (x - loc) / scale
        return (out if self.standard_normal else (out + 1) / 2).to(x.dtype)

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        loc, scale = self._loc_scale(x)
        if not self.standard_normal:
            x = x * 2 - 1
        return (x * scale + loc).to(x.dtype)

    def normalize(self, action: torch.Tensor) -> torch.Tensor:
        """An env-scale action in the normalised range (the forward map)."""
        return self._apply_transform(action)

    def denormalize(self, action: torch.Tensor) -> torch.Tensor:
        """A normalised action in the env's range (the inverse map)."""
        return self._inv_apply_transform(action)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict  # env outputs hold no action

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return tensordict_reset

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            value = tensordict.get(in_key, None)
            if value is not None:
                tensordict.set(out_key, self._apply_transform(value))
        return tensordict

    def _supports_rollout_map(self) -> bool:
        return False

    def transform_observation_spec(self, observation_spec: Any) -> Any:
        return observation_spec

    def transform_reward_spec(self, reward_spec: Any) -> Any:
        return reward_spec

    def transform_leaf_spec_inv(self, spec: Any) -> Any:
        from rl_envs.specs import Bounded

        if self.loc is None or not self._explicit:
            low, high = _bounds(spec)
            self.loc = ((high + low) / 2).to(torch.get_default_dtype())
            self.scale = ((high - low) / 2).to(torch.get_default_dtype())
            lo, hi = (-1.0, 1.0) if self.standard_normal else (0.0, 1.0)
            return Bounded(low=lo, high=hi, shape=spec.shape, device=spec.device, dtype=spec.dtype)
        try:  # explicit loc / scale: the env's bounds mapped through the affine map
            low, high = _bounds(spec)
        except RuntimeError:
            return spec.clone()  # unbounded stays unbounded
        a, b = self._apply_transform(low), self._apply_transform(high)
        return Bounded(
            low=torch.minimum(a, b),
            high=torch.maximum(a, b),
            shape=spec.shape,
            device=spec.device,
            dtype=spec.dtype,
        )

    def extra_repr(self) -> str:
        return (
            f"in_keys_inv={self.in_keys_inv}, loc={self.loc}, scale={self.scale}, "
            f"standard_normal={self.standard_normal}"
        )
