"""``VecNormV2``: TorchRL's second VecNorm (per-entry running moments with bias correction)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs.transforms._utils import NestedKey, unbounded_like
from rl_envs.transforms.transform import Transform


class VecNormV2(Transform):
    """Normalises entries by exponentially-weighted running first and second moments.

    For each ``in_key``, with ``x`` the entry (its batch dims kept, unless
    ``reduce_batch_dims``): ``count += 1``, ``loc <- lerp(loc, x, w)``,
    ``var <- lerp(var, x**2, w)`` with ``w = 1 - decay`` (``1 / count`` when
    ``decay == 1``), then ``out = (x - loc / c) / max(sqrt((var - loc**2) / c), eps)``
    with the bias correction ``c = 1 - decay**count`` (1 when ``decay == 1``).
    With ``reduce_batch_dims`` the batch mean of ``x`` and ``x**2`` is used,
    ``count += n`` and ``w = 1 - decay**n`` (``n / count``), ``n`` the batch size.
    Statistics update at every reset and step (entries absent at reset, like the
    reward, are skipped) unless :meth:`freeze` was called.

    Only TorchRL's default ``stateful=True`` mode is implemented: the statistics
    live in the transform (``state_dict`` holds them).

    Args:
        in_keys: entries to normalise.
        out_keys: destinations (default ``in_keys``).
        lock: a lock held while updating (e.g. ``multiprocessing.Lock()``).
        stateful: must be ``True`` (see above).
        decay: the weight of the past in the moving averages.
        eps: floor of the scale.
        shared_data: not supported here (statistics are not shared across processes).
        reduce_batch_dims: average over the batch dims before updating.

    Raises:
        NotImplementedError: ``stateful=False`` or ``shared_data``.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = VecNormV2(in_keys=["obs"], decay=1.0, reduce_batch_dims=True)
        >>> t(TensorDict(obs=torch.tensor([[1.0], [3.0]]), batch_size=[2]))["obs"].squeeze(-1)
        tensor([-1.,  1.])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey] | None = None,
        *,
        lock: Any = None,
        stateful: bool = True,
        decay: float = 0.9999,
        eps: float = 1e-4,
        shared_data: TensorDictBase | None = None,
        reduce_batch_dims: bool = False,
    ) -> None:
        if not stateful:
            raise NotImplementedError(
                "VecNormV2(stateful=False) (statistics carried in the data) is not implemented "
                "here; use the default stateful=True."
            )
        if shared_data is not None:
            raise NotImplementedError(
                "VecNormV2(shared_data=...) is not implemented here; use VecNorm(shared_td=...) "
                "to share statistics between processes."
            )
        super().__init__(in_keys, out_keys)
        self.lock = lock
        self.stateful = True
        self.decay = float(decay)
        self.eps = float(eps)
        self.reduce_batch_dims = reduce_batch_dims
        self.frozen = False
        self._stats: dict[NestedKey, list[torch.Tensor]] = {}  # key -> [loc, var, count]

    # ------------------------------------------------------------------ state
    def freeze(self) -> VecNormV2:
        """Stops the updates (normalisation goes on with the current statistics)."""
        self.frozen = True
        return self

    def unfreeze(self) -> VecNormV2:
        """Resumes the updates."""
        self.frozen = False
        return self

    def frozen_copy(self) -> VecNormV2:
        """A frozen clone (its statistics are a copy).

        Raises:
            RuntimeError: no statistics yet (TorchRL's message).
        """
        missing = [k for k in self.in_keys if k not in self._stats]
        if missing:
            raise RuntimeError(
                f"VecNormV2.frozen_copy: no statistics yet for {missing}. Make sure the VecNorm "
                "has been initialized: run at least one step through it first."
            )
        return self.clone().freeze()

    def to_observation_norm(self) -> Transform:
        """An ``ObservationNorm`` (``standard_normal=True``) per key with the current statistics
        (one transform, or a ``Compose`` of several)."""
        from rl_envs.transforms.compose import Compose
        from rl_envs.transforms.observation_norm import ObservationNorm

        norms = []
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            loc, scale = self._loc_scale(in_key)
            norms.append(
                ObservationNorm(
                    loc=loc.clone(),
                    scale=scale.clone(),
                    in_keys=[in_key],
                    out_keys=[out_key],
                    standard_normal=True,
                )
            )
        return norms[0] if len(norms) == 1 else Compose(*norms)

    def clone(self) -> VecNormV2:
        other = super().clone()
        other._stats = {k: [t.clone() for t in v] for k, v in self._stats.items()}
        return other

    @property
    def loc(self) -> TensorDictBase:
        """The bias-corrected running means, one entry per key (a TensorDict, as TorchRL's)."""
        return TensorDict({k: self._loc_scale(k)[0] for k in self._stats})

    @property
    def scale(self) -> TensorDictBase:
        """The bias-corrected running standard deviations (floored at ``eps``), one entry per
        key."""
        return TensorDict({k: self._loc_scale(k)[1] for k in self._stats})

    def get_extra_state(self) -> dict[str, Any]:
        return {"stats": {k: [t.clone() for t in v] for k, v in self._stats.items()}}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self._stats = {k: [t.clone() for t in v] for k, v in state.get("stats", {}).items()}

    # ------------------------------------------------------------------ maths
    def _update(self, key: NestedKey, x: torch.Tensor, nb: int) -> None:
        x = x if x.is_floating_point() else x.to(torch.get_default_dtype())
        if self.reduce_batch_dims and nb:
            dims = tuple(range(nb))
            n = int(math.prod(x.shape[:nb]))
            mean, mean2 = x.mean(dims), x.pow(2).mean(dims)
        else:
            n, mean, mean2 = 1, x, x.pow(2)
        stats = self._stats.get(key)
        if stats is None:
            zeros = torch.zeros_like(mean)
            stats = [zeros, zeros.clone(), torch.zeros((), dtype=torch.int64, device=x.device)]
            self._stats[key] = stats
        loc, var, count = stats
        count += n
        weight = 1 - self.decay**n if self.decay != 1.0 else n / int(count)
        loc.lerp_(mean.to(loc.dtype), weight)
        var.lerp_(mean2.to(var.dtype), weight)

    def _loc_scale(self, key: NestedKey) -> tuple[torch.Tensor, torch.Tensor]:
        loc, var, count = self._stats[key]
        c = 1 - math.exp(int(count) * math.log(self.decay)) if self.decay < 1.0 else 1.0
        var = var - loc.pow(2)
        loc, var = loc / c, var / c
        return loc, var.clamp_min(0).sqrt().clamp_min(self.eps)

    def _normalise(self, td: TensorDictBase, tolerant: bool) -> TensorDictBase:
        lock = self.lock if self.lock is not None else nullcontext()
        with lock:
            for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
                x = td.get(in_key, None)
                if x is None:
                    if tolerant:
                        continue
                    raise KeyError(f"VecNormV2: entry {in_key!r} is missing from {td}.")
                if not self.frozen or in_key not in self._stats:
                    self._update(in_key, x, td.batch_dims)
                loc, scale = self._loc_scale(in_key)
                td.set(out_key, ((x - loc) / scale).to(loc.dtype))
        return td

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._normalise(next_tensordict, self._missing_tolerance)

    def transform_leaf_spec(self, spec: Any) -> Any:
        """Normalised values are unbounded (floating; integers are cast to the default dtype)."""
        dtype = spec.dtype if spec.dtype.is_floating_point else torch.get_default_dtype()
        return unbounded_like(spec, dtype=dtype)

    def denorm(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Maps normalised ``out_keys`` back: ``x = y * scale + loc`` (written to ``in_keys``)."""
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            y = tensordict.get(out_key, None)
            if y is not None and in_key in self._stats:
                loc, scale = self._loc_scale(in_key)
                tensordict.set(in_key, y * scale + loc)
        return tensordict
