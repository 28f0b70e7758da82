"""``ObservationNorm``: an affine map of observations, with statistics from rollouts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rl_envs.transforms._utils import NestedKey, get_or_raise
from rl_envs.transforms.transform import Transform


class ObservationNorm(Transform):
    """Normalises observations: ``x * scale + loc``, or ``(x - loc) / scale``.

    With ``standard_normal=False`` (the default) the output is ``x * scale + loc``;
    with ``standard_normal=True`` it is ``(x - loc) / scale``. Either way
    :meth:`init_stats` makes the output zero-mean and unit-variance over
    rollouts of the env. Bounded specs get transformed bounds; the inverse
    (``in_keys_inv``) undoes the map for inputs.

    Args:
        loc: the offset (float or tensor broadcastable to the entry); ``None``
            leaves it to :meth:`init_stats`.
        scale: the scale; ``None`` leaves it to :meth:`init_stats`.
        in_keys: entries to normalise (default ``["observation"]``).
        out_keys: destinations (default ``in_keys``).
        in_keys_inv, out_keys_inv: inputs to de-normalise on the way in.
        standard_normal: which form of the map to use (see above).
        eps: floor of the standard deviation in :meth:`init_stats`
            (default: the dtype's machine epsilon).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ObservationNorm(loc=1.0, scale=2.0, in_keys=["obs"], standard_normal=True)
        >>> t(TensorDict(obs=torch.tensor([3.0, 5.0])))["obs"]
        tensor([1., 2.])
    """

    invertible = True

    def __init__(
        self,
        loc: float | torch.Tensor | None = None,
        scale: float | torch.Tensor | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        standard_normal: bool = False,
        eps: float | None = None,
    ) -> None:
        if in_keys is None:
            in_keys = ["observation"]
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.standard_normal = standard_normal
        self.eps = eps
        self.register_buffer("loc", _as_tensor(loc))
        self.register_buffer("scale", _as_tensor(scale))

    @property
    def initialized(self) -> bool:
        return self.loc is not None and self.scale is not None

    def _check_init(self) -> None:
        if not self.initialized:
            raise RuntimeError(
                "ObservationNorm: Loc/Scale have not been initialized. Either pass in values "
                "in the constructor or call the init_stats method (num_iter steps of the "
                "TransformedEnv holding the transform)."
            )

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        self._check_init()
        if self.standard_normal:
            return (x - self.loc) / self.scale
        return x * self.scale + self.loc

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        self._check_init()
        if self.standard_normal:
            return x * self.scale + self.loc
        return (x - self.loc) / self.scale

    def init_stats(
        self,
        num_iter: int,
        reduce_dim: int | Sequence[int] = 0,
        cat_dim: int | None = None,
        key: NestedKey | None = None,
        keep_dims: Sequence[int] | None = None,
    ) -> None:
        """Sets ``loc`` and ``scale`` from ``num_iter`` random steps of the parent env.

        Args:
            num_iter: number of env steps to collect (one rollout, resetting when done).
            reduce_dim: dimension(s) of the stacked data to average over. The
                data is the rollout of ``in_key``, shaped ``[*B, T, *obs]``;
                ``reduce_dim=0`` with an unbatched env reduces over time.
            cat_dim: dimension along which rollouts are concatenated (default ``reduce_dim``).
            key: the entry to compute statistics of (default: the only in_key).
            keep_dims: dims of ``reduce_dim`` kept as size one in the stats.

        Raises:
            RuntimeError: outside an env, or when loc/scale were given.
        """
        if self.loc is not None or self.scale is not None:
            raise RuntimeError(
                "ObservationNorm.init_stats: Loc/Scale are already initialized (given to the "
                "constructor or by an earlier init_stats); create the transform without them "
                "to compute statistics."
            )
        parent = self.parent
        if parent is None:
            raise RuntimeError(
                "ObservationNorm.init_stats: Cannot initialize the transform if parent env is "
                "not defined; append the transform to a TransformedEnv first."
            )
        if key is None:
            if len(self.in_keys) != 1:
                raise ValueError(
                    "ObservationNorm.init_stats: Transform has multiple in_keys but no specific "
                    f"key was passed as an argument (in_keys={self.in_keys}); pass key=."
                )
            key = self.in_keys[0]
        if num_iter < 2:
            raise ValueError(f"init_stats needs num_iter >= 2, got {num_iter}.")
        rollout = parent.rollout(num_iter, break_when_any_done=False)
        data = get_or_raise(self, rollout, key)
        dims = (reduce_dim,) if isinstance(reduce_dim, int) else tuple(reduce_dim)
        del cat_dim  # a single rollout is collected: there is nothing to concatenate
        mean = data.mean(dim=dims, keepdim=True)
        std = data.std(dim=dims, keepdim=True)
        eps = self.eps if self.eps is not None else torch.finfo(data.dtype).eps
        std = std.clamp_min(eps)
        if keep_dims is None:
            mean, std = _squeeze_dims(mean, dims), _squeeze_dims(std, dims)
        else:
            drop = tuple(d for d in dims if d not in set(keep_dims))
            mean, std = _squeeze_dims(mean, drop), _squeeze_dims(std, drop)
        if self.standard_normal:
            self.loc, self.scale = mean, std
        else:
            self.loc, self.scale = -mean / std, 1.0 / std
        self._invalidate_specs()

    def transform_leaf_spec(self, spec: Any) -> Any:
        from rl_envs.specs import Bounded

        if isinstance(spec, Bounded) and self.initialized:
            low = self._apply_transform(spec.space.low)
            high = self._apply_transform(spec.space.high)
            low, high = torch.minimum(low, high), torch.maximum(low, high)
            return Bounded(
                low=low.expand(spec.shape).clone(),
                high=high.expand(spec.shape).clone(),
                shape=spec.shape,
                device=spec.device,
                dtype=spec.dtype,
            )
        return spec

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, standard_normal={self.standard_normal}"


def _as_tensor(value: float | torch.Tensor | None) -> torch.Tensor | None:
    if value is None:
        return None
    return (
        torch.as_tensor(value, dtype=torch.get_default_dtype())
        if not isinstance(value, torch.Tensor)
        else value
    )


def _squeeze_dims(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    for d in sorted((d % x.ndim for d in dims), reverse=True):
        x = x.squeeze(d)
    return x
