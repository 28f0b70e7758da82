"""Slice samplers: contiguous runs of steps from single trajectories."""

from __future__ import annotations

from typing import Any

import torch

from rl_buffers._layout import NestedKey, as_tuple
from rl_buffers.samplers._trajectories import Trajectories, locate
from rl_buffers.samplers.base import Sampler, check_not_empty
from rl_buffers.samplers.random import SamplerWithoutReplacement
from rl_buffers.storages.base import Storage


def _replace_last(key: tuple[str, ...], name: str) -> tuple[str, ...]:
    return (*key[:-1], name)


def _info_key(key: tuple[str, ...]) -> NestedKey:
    return key[0] if len(key) == 1 else key


def _as_span(span: bool | int | tuple | list) -> tuple[bool | int, bool | int]:
    pair = tuple(span) if isinstance(span, (tuple, list)) else (span, span)
    if len(pair) != 2 or any(not isinstance(side, (bool, int)) or side < 0 for side in pair):
        raise ValueError(
            f"span must be a bool, an int >= 0 or a (left, right) pair of them; got {span!r}."
        )
    return pair


class SliceSampler(Sampler):
    """Samples ``num_slices`` slices of ``slice_len`` consecutive steps, each inside one trajectory.

    Trajectories are located by ``traj_key`` (an id that changes between
    trajectories) when the storage holds it, else by ``end_key`` (True on the
    last step; default ``("next", "done")``); with neither given, the
    collectors' ``("collector", "traj_ids")`` then ``"episode"`` are looked for
    first, as in TorchRL. A slice never crosses a trajectory boundary, the
    storage end or the write seam of a full ring buffer. Exactly one of
    ``num_slices`` and ``slice_len`` is given; the batch size must be a
    multiple of it. Samples are flat ``[batch_size]``, slice after slice.

    In sampled TensorDicts the last (real) step of each slice is marked truncated
    (``truncated_key``, and ``done`` alongside), and, when the stored data has an
    ``init_key`` entry, the first one ``init_key`` (as in TorchRL, none is made up).

    Args:
        num_slices: slices per batch (``slice_len = batch_size // num_slices``).
        slice_len: steps per slice (``num_slices = batch_size // slice_len``).
        end_key: episode-end flag, used when the storage has no trajectory ids.
            Default: ``("next", "done")``.
        traj_key: trajectory id entry, e.g. ``("collector", "traj_ids")``; both keys
            may be given (the ids are used when stored, else the flags).
        truncated_key: where to mark slice ends; ``None`` to leave samples unchanged.
        init_key: where to mark slice starts; ``None`` to skip.
        strict_length: skip trajectories shorter than ``slice_len`` (else their
            slices are shorter and the batch smaller).
        cache_values: TorchRL's flag to cache trajectory bounds between samples; here
            they are always cached until the storage is written again (kept for ported code).
        span: lets slices run past the start (left) and/or the end (right) of their
            trajectory, so they hold fewer steps: ``True`` on a side allows all but one step
            to be missing there, an int ``i`` at most ``i``; a bool or int applies to both
            sides, a pair ``(left, right)`` to each. Trajectories shorter than ``slice_len``
            become eligible when a span can make up the difference.
        pad_output: with ``strict_length=False``, short slices are padded to ``slice_len`` by
            repeating their last real step, so every batch holds ``batch_size`` items; the
            sample's ``("collector", "mask")`` is False on the repeats.
        replacement: ``False`` builds a :class:`SliceSamplerWithoutReplacement` with the
            same keywords (TorchRL's spelling; ``drop_last`` and ``shuffle`` go to it too).

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage
        >>> storage = LazyTensorStorage(20)
        >>> ids = torch.tensor([0] * 6 + [1] * 6)
        >>> storage.set(slice(0, 12), TensorDict(traj=ids, batch_size=[12]))
        >>> index, _ = SliceSampler(slice_len=3, traj_key="traj").sample(storage, 6)
        >>> ids[index].view(2, 3).unique(dim=1).shape[1]
        1
    """

    def __new__(cls, *args: Any, replacement: bool = True, **kwargs: Any) -> Any:
        if not replacement and cls is SliceSampler:
            cls = SliceSamplerWithoutReplacement  # its __init__ then runs with the same keywords
        return super().__new__(cls)

    def __init__(
        self,
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        end_key: NestedKey | None = None,
        traj_key: NestedKey | None = None,
        truncated_key: NestedKey | None = ("next", "truncated"),
        init_key: NestedKey | None = "is_init",
        strict_length: bool = True,
        cache_values: bool = False,
        span: bool | int | tuple[bool | int, bool | int] = False,
        pad_output: bool = False,
        replacement: bool = True,
    ) -> None:
        if not replacement and not isinstance(self, SliceSamplerWithoutReplacement):
            raise TypeError(f"{type(self).__name__} has no without-replacement variant.")
        if (num_slices is None) == (slice_len is None):
            raise ValueError("pass exactly one of num_slices and slice_len.")
        if pad_output and strict_length:
            raise ValueError(
                "pad_output=True is incompatible with strict_length=True: strict slices are "
                "never short, so there is nothing to pad; pass strict_length=False."
            )
        self.span = _as_span(span)
        self.pad_output = pad_output
        self.num_slices, self.slice_len = num_slices, slice_len
        self._traj_key = as_tuple(traj_key) if traj_key is not None else None
        self.end_key = as_tuple(end_key) if end_key is not None else ("next", "done")
        self._traj_key_auto = traj_key is None and end_key is None
        self.truncated_key = as_tuple(truncated_key) if truncated_key is not None else None
        self.init_key = as_tuple(init_key) if init_key is not None else None
        self.strict_length = strict_length
        self.cache_values = cache_values
        self._cache: tuple[int, int, Trajectories] | None = None

    def _shape(self, batch_size: int) -> tuple[int, int]:
        if self.num_slices is not None:
            if batch_size % self.num_slices:
                raise ValueError(
                    f"batch_size={batch_size} is not a multiple of num_slices={self.num_slices}."
                )
            return self.num_slices, batch_size // self.num_slices
        if batch_size % self.slice_len:
            raise ValueError(
                f"batch_size={batch_size} is not a multiple of slice_len={self.slice_len}."
            )
        return batch_size // self.slice_len, self.slice_len

    @property
    def traj_key(self) -> NestedKey | None:
        """The trajectory-id entry: as given, or the one found in the storage when neither
        ``traj_key`` nor ``end_key`` was given (``None`` until then, or with end flags)."""
        if self._traj_key is None:
            return None
        return self._traj_key[0] if len(self._traj_key) == 1 else self._traj_key

    def extend(self, index: torch.Tensor, storage: Storage | None = None) -> None:
        """A write through the buffer drops the cached trajectory bounds at once (TorchRL's
        ``_cache`` is empty after ``rb.extend``); direct storage writes are caught by
        :meth:`trajectories` comparing the storage's write count."""
        self._cache = None

    def trajectories(self, storage: Storage) -> Trajectories:
        """The stored trajectories (cached until the storage is written again)."""
        if not hasattr(storage, "get_leaf"):
            raise TypeError(
                "slice samplers need a tensor storage (LazyTensorStorage / LazyMemmapStorage)."
            )
        key = (id(storage), storage.write_count)
        if self._cache is None or self._cache[:2] != key:
            self._cache = (
                *key,
                locate(storage, end_key=self.end_key, traj_key=self._ids_key(storage)),
            )
        return self._cache[2]

    def _ids_key(self, storage: Storage) -> NestedKey | None:
        """The trajectory-id entry to read, or ``None`` to read the ``end_key`` flags."""
        if self._traj_key is not None:
            candidates = [self._traj_key]
        elif self._traj_key_auto:
            candidates = [("collector", "traj_ids"), ("episode",)]
        else:
            candidates = []
        for key in candidates:
            if storage.has_key(key):
                if self._traj_key_auto:  # resolved once, as TorchRL does
                    self._traj_key, self._traj_key_auto = key, False
                return key
        if not storage.has_key(self.end_key):
            looked = [*candidates, self.end_key]
            raise KeyError(
                f"{type(self).__name__}: the storage holds none of {looked} to locate "
                "trajectories; pass traj_key= (trajectory ids) or end_key= (end flags) naming "
                "an entry of the stored data."
            )
        return None

    def _missing_allowed(self, slice_len: int) -> tuple[int, int]:
        """How many steps a slice may miss before its trajectory's start and after its end."""
        if any(side is not True and side >= slice_len for side in self.span):
            raise ValueError(
                f"span={self.span} lets a slice of {slice_len} steps miss all of them: an int span "
                "must be lower than slice_len (True allows all but one step to be missing)."
            )
        left, right = (slice_len - 1 if side is True else int(side) for side in self.span)
        return left, right

    def _offset_range(
        self, length: torch.Tensor, slice_len: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Lowest and highest slice start relative to each trajectory's start (``hi < lo``: ineligible)."""
        left, right = self._missing_allowed(slice_len)
        hi = length - slice_len + right
        if not self.strict_length:
            hi = hi.clamp(min=0)
        return torch.full_like(length, -left), hi.clamp(max=length - 1)

    def _eligible(self, trajs: Trajectories, slice_len: int) -> torch.Tensor:
        lo, hi = self._offset_range(trajs.length, slice_len)
        eligible = (hi >= lo).nonzero().squeeze(-1)
        if eligible.numel() == 0:
            raise RuntimeError(
                f"no stored trajectory has {slice_len} steps or more (longest: {int(trajs.length.max())}): "
                "lower slice_len, raise num_slices, or pass strict_length=False or span=."
            )
        return eligible

    def _slices(self, trajs: Trajectories, chosen: torch.Tensor, slice_len: int,
                anchor: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """Flat positions of slices in trajectories ``chosen`` and their markers (``annotate``)."""
        start, length = trajs.start[chosen], trajs.length[chosen]
        lo, hi = self._offset_range(length, slice_len)
        if anchor is None:
            offset = lo + (torch.rand(chosen.shape, generator=self._rng) * (hi - lo + 1)).long()
        else:  # the slice contains `anchor` and stays inside its trajectory
            offset = torch.minimum(anchor - start, hi)
        relative = offset.unsqueeze(1) + torch.arange(slice_len).unsqueeze(0)
        valid = (relative >= 0) & (relative < length.unsqueeze(1))
        flat = start.unsqueeze(1) + relative
        if not self.pad_output:
            return flat[valid], self._markers(valid)
        # a padded slice repeats its last real step; markers sit on the real steps
        real = valid.sum(1)
        first = flat.masked_fill(~valid, flat.max() + 1).min(1, keepdim=True).values
        steps = torch.arange(slice_len).unsqueeze(0).minimum(real.unsqueeze(1) - 1)
        flat = first + steps
        end = torch.zeros_like(valid)
        end[torch.arange(valid.shape[0]), real - 1] = True
        begin = torch.zeros_like(valid)
        begin[:, 0] = True
        info = {"_slice_end": end.reshape(-1), "_slice_start": begin.reshape(-1),
                "_pad_mask": (torch.arange(slice_len) < real.unsqueeze(1)).reshape(-1)}  # fmt: skip
        return flat.reshape(-1), info

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        check_not_empty(storage)
        n_slices, slice_len = self._shape(batch_size)
        trajs = self.trajectories(storage)
        eligible = self._eligible(trajs, slice_len)
        chosen = eligible[torch.randint(eligible.numel(), (n_slices,), generator=self._rng)]
        flat, info = self._slices(trajs, chosen, slice_len)
        index = storage.unravel(flat)
        self._end_flags(storage, index, info)
        return index, info

    def _end_flags(self, storage: Storage, index: torch.Tensor, info: dict[str, Any]) -> None:
        """Adds TorchRL's end flags of the sampled steps to ``info`` (with ``truncated_key``):
        ``truncated`` on each slice's last real step, ``done`` (stored done or truncated) and
        ``terminated`` (stored, else False), shaped as the stored ``done`` (else ``[n, 1]``)."""
        if self.truncated_key is None:
            return
        done_key = _replace_last(self.truncated_key, "done")
        terminated_key = _replace_last(self.truncated_key, "terminated")
        where = index.cpu()
        where = where if storage.ndim == 1 else (where[..., 0], where[..., 1])

        def stored(key: tuple) -> torch.Tensor | None:
            return storage.get_leaf(key)[where].cpu() if storage.has_key(key) else None

        done = stored(done_key)
        shape = done.shape if done is not None else (info["_slice_end"].shape[0], 1)
        truncated = info["_slice_end"].reshape(-1, *([1] * (len(shape) - 1))).expand(shape).clone()
        terminated = stored(terminated_key)
        # keyed as TorchRL does: a plain string for a root entry, a tuple for a nested one
        info[_info_key(self.truncated_key)] = truncated
        info[_info_key(done_key)] = (
            truncated | done.bool() if done is not None else truncated.clone()
        )
        info[_info_key(terminated_key)] = (
            terminated if terminated is not None else torch.zeros_like(truncated)
        )

    @staticmethod
    def _markers(valid: torch.Tensor) -> dict[str, Any]:
        lengths = valid.sum(1)
        ends = torch.cumsum(lengths, 0) - 1
        total = int(lengths.sum())
        last = torch.zeros(total, dtype=torch.bool)
        last[ends] = True
        first = torch.zeros(total, dtype=torch.bool)
        first[ends - lengths + 1] = True
        return {"_slice_end": last, "_slice_start": first}

    def annotate(self, data: Any, info: dict[str, Any]) -> Any:
        if "_slice_end" not in info:
            return data
        last, first = info["_slice_end"], info["_slice_start"]
        real = info.get("_pad_mask")
        if real is not None:
            data.set(("collector", "mask"), real.to(data.device or "cpu"))
        if self.truncated_key is not None:
            done_key = _replace_last(self.truncated_key, "done")
            like = data.get(done_key, None) if hasattr(data, "get") else None
            shape = like.shape if like is not None else (*last.shape, 1)
            mark = _expand_marker(last, shape, data)
            old_trunc = _keep_real(data.get(self.truncated_key, None), real)
            data.set(self.truncated_key, mark | old_trunc if old_trunc is not None else mark)
            if like is not None:
                data.set(done_key, _keep_real(like, real) | mark)
        if self.init_key is not None:
            old = data.get(self.init_key, None)
            if old is not None:
                data.set(self.init_key, _expand_marker(first, old.shape, data) | old)
        return data


def _expand_marker(marker: torch.Tensor, shape: torch.Size, data: Any) -> torch.Tensor:
    return marker.reshape(-1, *([1] * (len(shape) - 1))).expand(shape).to(data.device or "cpu")


def _keep_real(flag: torch.Tensor | None, real: torch.Tensor | None) -> torch.Tensor | None:
    """``flag`` with the padded repeats cleared (they are not steps of the trajectory)."""
    if flag is None or real is None:
        return flag
    return flag & _expand_marker(real, flag.shape, flag)


class SliceSamplerWithoutReplacement(SliceSampler, SamplerWithoutReplacement):
    """A :class:`SliceSampler` that visits each eligible trajectory once per epoch.

    Each call takes the next ``num_slices`` trajectories of a permutation (one
    random slice in each); ``ran_out`` is set after the last ones.

    Args:
        num_slices, slice_len, end_key, traj_key, truncated_key, init_key,
        strict_length: as in :class:`SliceSampler`.
        drop_last: drop the last call of an epoch if it has fewer trajectories.
        shuffle: random trajectory order (``False``: storage order).

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage
        >>> storage = LazyTensorStorage(20)
        >>> storage.set(slice(0, 8), TensorDict(traj=torch.arange(8) // 2, batch_size=[8]))
        >>> sampler = SliceSamplerWithoutReplacement(slice_len=2, traj_key="traj", shuffle=False)
        >>> [sampler.sample(storage, 4)[0].tolist() for _ in range(2)]
        [[0, 1, 2, 3], [4, 5, 6, 7]]
    """

    def __init__(self, *, drop_last: bool = False, shuffle: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.drop_last, self.shuffle = drop_last, shuffle
        self._perm: torch.Tensor | None = None
        self._pos = 0
        self._epoch_key: tuple | None = None
        self.ran_out = False

    @property
    def _sample_list(self) -> torch.Tensor | None:
        """The trajectories the current epoch has left (TorchRL's attribute); ``None`` when
        the next call starts a new epoch."""
        if self._perm is None or self.ran_out:
            return None
        return self._perm[self._pos :]

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        check_not_empty(storage)
        n_slices, slice_len = self._shape(batch_size)
        trajs = self.trajectories(storage)
        key = (id(storage), storage.write_count, slice_len)
        if self._epoch_key == "restored":
            self._epoch_key = key
        if self._perm is None or self._epoch_key != key or self.ran_out:
            eligible = self._eligible(trajs, slice_len)
            self._perm = (
                eligible[torch.randperm(eligible.numel(), generator=self._rng)]
                if self.shuffle
                else eligible
            )
            self._pos, self._epoch_key, self.ran_out = 0, key, False
        chosen = self._perm[self._pos : self._pos + n_slices]
        if self.drop_last and chosen.numel() < n_slices:
            raise RuntimeError(
                "the epoch has no full batch left (drop_last=True): sample again for a new epoch."
            )
        self._pos += chosen.numel()
        left = self._perm.numel() - self._pos
        if left == 0 or (self.drop_last and left < n_slices):
            self.ran_out = True
        flat, info = self._slices(trajs, chosen, slice_len)
        index = storage.unravel(flat)
        self._end_flags(storage, index, info)
        return index, info

    def empty(self) -> None:
        self._perm, self._pos, self._epoch_key, self.ran_out = None, 0, None, False

    def state_dict(self) -> dict:
        return {"perm": self._perm, "pos": self._pos, "ran_out": self.ran_out}

    def load_state_dict(self, state: dict) -> None:
        self._perm, self._pos, self.ran_out = state["perm"], state["pos"], state["ran_out"]
        self._epoch_key = None if self._perm is None else "restored"
