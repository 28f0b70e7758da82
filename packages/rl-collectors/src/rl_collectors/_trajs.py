"""``trajs_per_batch``: regroup a collector's batches into batches of whole trajectories."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_collectors._batching import MASK_KEY, TRAJ_IDS_KEY

TRAJ_FORMATS = ("padded", "cat")


def check_traj_options(trajs_per_batch: int | None, traj_format: str | None) -> str | None:
    """The trajectory layout to use (``None`` without ``trajs_per_batch``).

    Raises:
        ValueError: ``traj_format`` without ``trajs_per_batch``, an unknown format, or a
            ``trajs_per_batch`` below 1.
    """
    if trajs_per_batch is None:
        if traj_format is not None:
            raise ValueError(
                "traj_format only applies with trajs_per_batch; pass trajs_per_batch=N."
            )
        return None
    if trajs_per_batch < 1:
        raise ValueError(f"trajs_per_batch must be at least 1; got {trajs_per_batch}.")
    if traj_format is None:
        return "padded"
    if traj_format not in TRAJ_FORMATS:
        raise ValueError(f"traj_format must be 'padded' or 'cat'; got {traj_format!r}.")
    return traj_format


class TrajectoryAssembly:
    """Steps of trajectories in flight (``partial``, by id) and finished ones (``complete``).

    Args:
        trajs_per_batch: trajectories per emitted batch.
        traj_format: ``"padded"`` (``[N, T_max]``, padded steps repeat the last one and
            ``("collector", "mask")`` is ``False`` there) or ``"cat"`` (``[sum of lengths]``).
    """

    def __init__(self, trajs_per_batch: int, traj_format: str) -> None:
        self.trajs_per_batch = trajs_per_batch
        self.traj_format = traj_format
        self.partial: dict[int, list[TensorDictBase]] = {}
        self.complete: list[TensorDictBase] = []

    def __iter__(self) -> Iterator[Any]:
        # TorchRL's ``collector._traj_assembly`` unpacks as (partial, complete).
        return iter((self.partial, self.complete))

    def clear(self) -> None:
        """Drop every trajectory in flight or waiting (after a reset)."""
        self.partial.clear()
        self.complete.clear()

    def ingest(self, batch: TensorDictBase) -> None:
        """Split ``batch`` (``[..., T]``) into per-trajectory runs, in time order per sub-env."""
        ids = batch.get(TRAJ_IDS_KEY, None)
        if ids is None:
            raise KeyError(
                "trajs_per_batch needs ('collector', 'traj_ids') in each batch; do not pass "
                "track_traj_ids=False with it."
            )
        rows = batch.reshape(-1, batch.shape[-1])
        ids = ids.reshape(-1, batch.shape[-1])
        done = _done(rows)
        for row in range(rows.shape[0]):
            change = (ids[row, 1:] != ids[row, :-1]).nonzero().flatten().add(1).tolist()
            bounds = [0, *change, ids.shape[1]]
            for start, stop in itertools.pairwise(bounds):
                traj = int(ids[row, start])
                if traj < 0:  # steps a preempted worker did not collect
                    continue
                self.partial.setdefault(traj, []).append(rows[row, start:stop])
                if bool(done[row, stop - 1]):
                    self.complete.append(torch.cat(self.partial.pop(traj), 0))

    def ready(self) -> bool:
        return len(self.complete) >= self.trajs_per_batch

    def emit(self, traj_format: str | None = None, count: int | None = None) -> TensorDictBase:
        """The next ``count`` (default ``trajs_per_batch``) finished trajectories, in
        ``traj_format`` (default: the assembly's)."""
        count = self.trajs_per_batch if count is None else count
        trajs = self.complete[:count]
        del self.complete[:count]
        if (traj_format or self.traj_format) == "cat":
            return torch.cat(trajs, 0)
        longest = max(traj.shape[0] for traj in trajs)
        padded = []
        for traj in trajs:
            length = traj.shape[0]
            rows = traj[torch.arange(longest).clamp(max=length - 1)]
            rows.set(MASK_KEY, torch.arange(longest, device=rows.device) < length)
            padded.append(rows)
        return torch.stack(padded, 0)


def _done(rows: TensorDictBase) -> torch.Tensor:
    """``[R, T]`` end-of-trajectory flags from ``("next", "done")`` (or terminated / truncated)."""
    out = None
    for key in (("next", "done"), ("next", "terminated"), ("next", "truncated")):
        flag = rows.get(key, None)
        if flag is not None:
            flag = flag.reshape(*rows.shape, -1).any(-1)
            out = flag if out is None else out | flag
    if out is None:
        raise KeyError("trajs_per_batch needs ('next', 'done') in each batch.")
    return out


def trajectory_batches(
    batches: Iterator[TensorDictBase | None],
    assembly: TrajectoryAssembly,
    replay_buffer: Any | None,
    trajs_per_write: int | None = None,
) -> Iterator[TensorDictBase | None]:
    """Feed ``batches`` to ``assembly`` and yield each batch of whole trajectories.

    With a ``replay_buffer``, the finished trajectories go there instead, as flat time
    steps one trajectory after the other (TorchRL's layout, what a ``SliceSampler`` reads):
    ``trajs_per_write`` at a time (default: all those finished), and ``None`` is yielded
    after each collected batch that wrote some.
    """
    for batch in batches:
        assembly.ingest(batch)
        if replay_buffer is None:
            while assembly.ready():
                yield assembly.emit()
            continue
        wrote = False
        while assembly.complete and len(assembly.complete) >= (trajs_per_write or 1):
            replay_buffer.extend(assembly.emit("cat", trajs_per_write or len(assembly.complete)))
            wrote = True
        if wrote:
            yield None


class TrajectoryBatching:
    """What every collector shares for ``trajs_per_batch``: options, assembly, iteration.

    A collector defines ``_batches()`` (its ``frames_per_batch`` batches, extending
    ``_batch_replay_buffer``); iterating it yields those, or batches of whole trajectories.
    """

    replay_buffer: Any | None

    def _set_trajs_per_batch(
        self,
        trajs_per_batch: int | None,
        traj_format: str | None,
        split_trajs: bool,
        trajs_per_write: int | None = None,
    ) -> None:
        self.traj_format = check_traj_options(trajs_per_batch, traj_format)
        if trajs_per_write is not None and (trajs_per_batch is None or trajs_per_write < 1):
            raise ValueError(
                "trajs_per_write (trajectories per replay-buffer write) needs trajs_per_batch "
                f"and must be at least 1; got {trajs_per_write}."
            )
        self.trajs_per_write = trajs_per_write
        if trajs_per_batch is not None and split_trajs:
            raise ValueError("trajs_per_batch already yields whole trajectories; drop split_trajs.")
        self.trajs_per_batch = trajs_per_batch
        self._traj_assembly = (
            None
            if self.traj_format is None
            else TrajectoryAssembly(trajs_per_batch, self.traj_format)
        )
        # With trajs_per_batch, the replay buffer gets whole trajectories, not raw batches.
        self._batch_replay_buffer = self.replay_buffer if self._traj_assembly is None else None

    def _batches(self) -> Iterator[TensorDictBase | None]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[TensorDictBase | None]:
        if self._traj_assembly is None:
            return self._batches()
        return trajectory_batches(
            self._batches(), self._traj_assembly, self.replay_buffer, self.trajs_per_write
        )
