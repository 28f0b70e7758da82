"""``VecNorm``: normalisation by running statistics, shareable across processes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs.transforms._utils import NestedKey, missing_key_error
from rl_envs.transforms.transform import Transform


def _flat(key: NestedKey) -> str:
    return "_".join(key) if isinstance(key, tuple) else key


def _numpy_path(value: torch.Tensor, total: torch.Tensor) -> bool:
    """Whether :meth:`VecNorm._normalise_numpy` applies: CPU float32/64 tensors of the
    statistics' dtype, no autograd, not traced."""
    return (
        value.dtype is total.dtype
        and value.dtype in (torch.float32, torch.float64)
        and value.device.type == "cpu"
        and total.device.type == "cpu"
        and not value.requires_grad
        and not torch.compiler.is_compiling()
    )


class VecNorm(Transform):
    """Normalises entries with exponentially-decayed running mean and variance.

    For each in_key the transform keeps ``sum``, ``ssq`` (sum of squares) and
    ``count``, decayed by ``decay`` and updated with every batch it sees (all
    batch dims of the TensorDict are reduced); then it writes
    ``(x - mean) / max(std, eps)`` with ``mean = sum / count`` and
    ``std = sqrt(max(ssq / count - mean**2, eps))``. The statistics live in a
    TensorDict (``transform.stats``) that can be placed in shared memory and
    handed to the copies of the transform in several workers
    (:meth:`build_td_for_shared_vecnorm`), so every worker updates and reads
    the same numbers. They are part of ``state_dict()``.

    Args:
        in_keys: entries to normalise (default ``["observation", "reward"]``).
        out_keys: destinations (default ``in_keys``).
        shared_td: statistics to use (and update in place), e.g. in shared memory.
        lock: a lock (e.g. ``multiprocessing.Lock()``) held while updating shared stats.
        decay: the decay of the running sums.
        eps: floor of the variance and of the standard deviation.
        shapes: per-key shapes of one (unbatched) entry, to create the stats
            before the first batch; inferred from data otherwise.
        new_api: ``True`` builds a :class:`VecNormV2` with the other arguments instead
            (TorchRL's switch); ``None``/``False`` build this class.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = VecNorm(in_keys=["obs"], decay=1.0)
        >>> out = t(TensorDict(obs=torch.tensor([[1.0], [3.0]]), batch_size=[2]))
        >>> out["obs"].squeeze(-1)
        tensor([-1.,  1.])
    """

    def __new__(cls, *args: Any, new_api: bool | None = None, **kwargs: Any) -> Any:
        # TorchRL's switch: VecNorm(..., new_api=True) builds a VecNormV2
        if new_api:
            from rl_envs.transforms.vecnorm_v2 import VecNormV2  # it does not import this module

            return VecNormV2(*args, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        shared_td: TensorDictBase | None = None,
        lock: Any = None,
        decay: float = 0.9999,
        eps: float = 1e-4,
        shapes: Sequence[Sequence[int]] | None = None,
        *,
        new_api: bool | None = None,
    ) -> None:
        if in_keys is None:
            in_keys = ["observation", "reward"]
        super().__init__(in_keys, out_keys)
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"VecNorm: decay must be in (0, 1], got {decay}.")
        self.decay = decay
        self.eps = eps
        self.lock = lock
        self.frozen = False
        if shared_td is not None:
            for key in self.in_keys:
                for suffix in ("_sum", "_ssq", "_count"):
                    if _flat(key) + suffix not in shared_td.keys():  # noqa: SIM118 (TensorDict needs .keys())
                        raise KeyError(
                            f"VecNorm: shared_td lacks {_flat(key) + suffix!r}; build it with "
                            "VecNorm.build_td_for_shared_vecnorm(env, keys)."
                        )
            self.stats: TensorDictBase = shared_td
        else:
            self.stats = TensorDict()
            if shapes is not None:
                if len(shapes) != len(self.in_keys):
                    raise ValueError("VecNorm: pass one shape per in_key.")
                for key, shape in zip(self.in_keys, shapes, strict=True):
                    self._init_key(key, torch.Size(shape), torch.get_default_dtype(), None)

    def _init_key(self, key: NestedKey, shape: torch.Size, dtype: torch.dtype, device: Any) -> None:
        name = _flat(key)
        self.stats.set(name + "_sum", torch.zeros(shape, dtype=dtype, device=device))
        self.stats.set(name + "_ssq", torch.zeros(shape, dtype=dtype, device=device))
        self.stats.set(name + "_count", torch.zeros((), dtype=dtype, device=device))

    def _normalise(self, key: NestedKey, value: torch.Tensor, batch_dims: int) -> torch.Tensor:
        name = _flat(key)
        if name + "_sum" not in self.stats.keys():  # noqa: SIM118
            dtype = value.dtype if value.is_floating_point() else torch.get_default_dtype()
            self._init_key(key, value.shape[batch_dims:], dtype, value.device)
        total = self.stats.get(name + "_sum")
        ssq = self.stats.get(name + "_ssq")
        count = self.stats.get(name + "_count")
        if value.shape[batch_dims:] != total.shape:
            raise ValueError(
                f"VecNorm: entry {key!r} has per-sample shape {tuple(value.shape[batch_dims:])}, "
                f"but the statistics have shape {tuple(total.shape)}."
            )
        if _numpy_path(value, total):
            return self._normalise_numpy(value, total, ssq, count, batch_dims)
        x = value.to(total.dtype)
        if not self.frozen:
            dims = tuple(range(batch_dims))
            n = float(math.prod(x.shape[:batch_dims]))
            with self.lock if self.lock is not None else nullcontext():
                total.mul_(self.decay).add_(x.sum(dims) if dims else x)
                ssq.mul_(self.decay).add_((x * x).sum(dims) if dims else x * x)
                count.mul_(self.decay).add_(n)
        mean, std = self._mean_std(total, ssq, count)
        return ((x - mean) / std).to(value.dtype if value.is_floating_point() else total.dtype)

    def _normalise_numpy(
        self,
        value: torch.Tensor,
        total: torch.Tensor,
        ssq: torch.Tensor,
        count: torch.Tensor,
        batch_dims: int,
    ) -> torch.Tensor:
        """:meth:`_normalise` on numpy views of CPU tensors, bit for bit: the same IEEE
        operations in the same order (sums over batch dims and the square root stay
        torch's), at a fraction of torch's per-op dispatch cost on one env's small entries."""
        x = value.numpy()
        t, s, c = total.numpy(), ssq.numpy(), count.numpy()
        if not self.frozen:
            dims = tuple(range(batch_dims))
            n = float(math.prod(value.shape[:batch_dims]))
            with self.lock if self.lock is not None else nullcontext():
                t *= self.decay
                t += value.sum(dims).numpy() if dims else x
                s *= self.decay
                s += (value * value).sum(dims).numpy() if dims else x * x
                c *= self.decay
                c += n
        c = np.maximum(c, 1e-12)
        mean = t / c
        var = np.maximum(s / c - mean * mean, self.eps)
        std = torch.from_numpy(np.asarray(var)).sqrt().numpy()  # torch's sqrt: numpy's may round
        # np.asarray: per-sample shape () gives numpy scalars, which from_numpy refuses
        return torch.from_numpy(np.asarray((x - mean) / np.maximum(std, self.eps)))

    def _mean_std(
        self, total: torch.Tensor, ssq: torch.Tensor, count: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        count = count.clamp_min(1e-12)
        mean = total / count
        var = (ssq / count - mean * mean).clamp_min(self.eps)
        return mean, var.sqrt().clamp_min(self.eps)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        batch_dims = next_tensordict.batch_dims
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            value = next_tensordict.get(in_key, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise missing_key_error(self, in_key, next_tensordict)
            next_tensordict.set(out_key, self._normalise(in_key, value, batch_dims))
        return next_tensordict

    # --------------------------------------------------------------- control
    def freeze(self) -> VecNorm:
        """Stops updating the statistics (evaluation); returns ``self``."""
        self.frozen = True
        return self

    def unfreeze(self) -> VecNorm:
        self.frozen = False
        return self

    def _check_initialized(self, what: str) -> None:
        missing = [k for k in self.in_keys if _flat(k) + "_sum" not in self.stats.keys()]  # noqa: SIM118
        if missing:
            raise RuntimeError(
                f"VecNorm.{what}: no statistics yet for {missing}. Make sure the VecNorm has been "
                "initialized: run at least one step through it (or pass shapes=...) first."
            )

    def _stat_td(self, which: str) -> TensorDictBase:
        self._check_initialized(which)
        out = TensorDict()
        for key in self.in_keys:
            name = _flat(key)
            mean, std = self._mean_std(
                self.stats.get(name + "_sum"),
                self.stats.get(name + "_ssq"),
                self.stats.get(name + "_count"),
            )
            out.set(key, mean if which == "loc" else std)
        return out

    @property
    def loc(self) -> TensorDictBase:
        """The running means, one entry per ``in_key`` (TorchRL's attribute)."""
        return self._stat_td("loc")

    @property
    def scale(self) -> TensorDictBase:
        """The running standard deviations, one entry per ``in_key``."""
        return self._stat_td("scale")

    def denorm(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Undo the normalisation: ``in_key = out_key * std + mean`` for each key pair.

        Returns:
            A shallow copy of ``tensordict`` holding the recovered entries.

        Raises:
            RuntimeError: no statistics yet.
        """
        loc, scale = self.loc, self.scale
        out = tensordict.copy()
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            value = tensordict.get(out_key, None)
            if value is not None:
                out.set(in_key, value * scale.get(in_key) + loc.get(in_key))
        return out

    def frozen_copy(self) -> VecNorm:
        """A frozen clone that reads this VecNorm's statistics without updating them.

        The statistics are shared, as in TorchRL: an evaluation env built with the frozen
        copy normalises with the training env's latest statistics. Use
        ``frozen_copy()`` then ``copy.stats = copy.stats.clone()`` for a snapshot.

        Raises:
            RuntimeError: no statistics yet.
        """
        self._check_initialized("frozen_copy")
        out = self.clone()
        out.stats = self.stats
        out.lock = None  # it never writes
        return out.freeze()

    def to_observation_norm(self) -> Transform:
        """An :class:`ObservationNorm` (``standard_normal=True``) with the current statistics."""
        from rl_envs.transforms.compose import Compose
        from rl_envs.transforms.observation_norm import ObservationNorm

        norms = []
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            name = _flat(in_key)
            mean, std = self._mean_std(
                self.stats.get(name + "_sum"),
                self.stats.get(name + "_ssq"),
                self.stats.get(name + "_count"),
            )
            norms.append(
                ObservationNorm(
                    loc=mean.clone(),
                    scale=std.clone(),
                    in_keys=[in_key],
                    out_keys=[out_key],
                    standard_normal=True,
                )
            )
        return norms[0] if len(norms) == 1 else Compose(*norms)

    @staticmethod
    def build_td_for_shared_vecnorm(
        env: Any, keys: Sequence[NestedKey] | None = None, memmap: bool = False
    ) -> TensorDictBase:
        """Zero statistics for ``keys`` of ``env``'s specs, in shared memory.

        Args:
            env: an env whose observation / reward specs hold the keys.
            keys: the entries (default ``["observation", "reward"]``).
            memmap: place the stats in memory-mapped files instead of shared memory.
        """
        keys = list(keys) if keys is not None else ["observation", "reward"]
        batch_dims = len(env.batch_size)
        stats = TensorDict()
        for key in keys:
            spec = None
            for composite in (env.observation_spec, env.full_reward_spec):
                if key in set(composite.keys(True, True)):
                    spec = composite[key]
            if spec is None:
                raise KeyError(f"build_td_for_shared_vecnorm: {key!r} is not in the env's specs.")
            shape = spec.shape[batch_dims:]
            dtype = spec.dtype if spec.dtype.is_floating_point else torch.get_default_dtype()
            name = _flat(key)
            stats.set(name + "_sum", torch.zeros(shape, dtype=dtype))
            stats.set(name + "_ssq", torch.zeros(shape, dtype=dtype))
            stats.set(name + "_count", torch.zeros((), dtype=dtype))
        return stats.memmap_() if memmap else stats.share_memory_()

    def get_extra_state(self) -> dict[str, torch.Tensor]:
        return {k: v.clone() for k, v in self.stats.items()}

    def set_extra_state(self, state: dict[str, torch.Tensor]) -> None:
        for key, value in state.items():
            current = self.stats.get(key, None)
            if current is not None and current.shape == value.shape:
                current.copy_(value)  # in place: keeps shared-memory stats shared
            else:
                self.stats.set(key, value.clone())

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, decay={self.decay}, eps={self.eps}, frozen={self.frozen}"
