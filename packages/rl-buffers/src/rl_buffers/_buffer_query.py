"""``ReplayBuffer.query``: the stored trajectories a predicate accepts, mixed into the buffer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection
from tensordict.utils import NestedKey, unravel_key

from rl_buffers.trajectory import Trajectory
from rl_buffers.trajectory_bounds import find_start_stop_traj
from rl_buffers.trajectory_query import check_predicate, split_signal

_Step = tuple[Callable[[Any], Any], list | None, list | None]


def _as_tuple(key: NestedKey) -> tuple:
    key = unravel_key(key)
    return key if isinstance(key, tuple) else (key,)


def _overlap(first: NestedKey, second: NestedKey) -> bool:
    """Whether one key is the other or nested under it."""
    a, b = _as_tuple(first), _as_tuple(second)
    depth = min(len(a), len(b))
    return a[:depth] == b[:depth]


def transform_plan(steps: list[_Step], needed: set) -> tuple[list[_Step], set | None]:
    """The read transforms that can change ``needed`` keys, and the keys they read.

    Walks the transforms backwards: one whose ``out_keys`` touch a needed key is kept
    and its ``in_keys`` become needed. One with unknown keys is kept with every
    transform before it, and all keys are needed (``None``).

    Examples:
        >>> class T:
        ...     def __init__(self, i, o): self.in_keys, self.out_keys = [i], [o]
        >>> a, b = T("x", "y"), T("obs", "obs")
        >>> plan, keys = transform_plan([(a, a.in_keys, a.out_keys), (b, b.in_keys, b.out_keys)], {"y"})
        >>> [step[0] is a for step in plan], sorted(keys)
        ([True], ['x', 'y'])
    """
    kept: list[_Step] = []
    needed = set(needed)
    for position in range(len(steps) - 1, -1, -1):
        step = steps[position]
        _, in_keys, out_keys = step
        if out_keys is None:
            return list(steps[: position + 1]) + kept[::-1], None
        if any(_overlap(out, key) for out in out_keys for key in needed):
            if in_keys is None:  # reads unknown keys: those before it matter too
                return list(steps[: position + 1]) + kept[::-1], None
            kept.append(step)
            needed.update(unravel_key(k) for k in in_keys)
    return kept[::-1], needed


def _run(data: TensorDictBase, steps: list[_Step]) -> TensorDictBase:
    for fn, _, _ in steps:
        data = fn(data)
    return data


class TrajectoryQueries:
    """``rb.query(predicate)``: whole stored trajectories, filtered (TorchRL's API).

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage, TensorDictReplayBuffer, traj
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
        >>> ids = torch.tensor([0, 0, 0, 1, 1])
        >>> _ = rb.extend(TensorDict({("collector", "traj_ids"): ids, ("next", "reward"): ids[:, None] + 1.0}, [5]))
        >>> [t.length for t in rb.query()], [t.length for t in rb.query(traj.reward.sum() > 3)]
        ([3, 2], [2])
    """

    def query(
        self,
        predicate: Callable[[Trajectory], bool] | None = None,
        *,
        trajectory_key: NestedKey | None = None,
    ) -> list[Trajectory]:
        """The stored trajectories that ``predicate`` accepts, oldest first, as :class:`Trajectory`.

        Trajectories are found as :func:`~rl_buffers.iter_trajectories` finds them
        (ids, else end flags), following the storage's wrap point: the oldest one may
        have lost its head to newer writes. The buffer's read transforms apply, as on
        a sample. A predicate built from ``traj`` reads only the entries it names (and
        runs only the transforms that can change them); matches are then read whole.
        For ``[envs, time]`` storages, each env's trajectories come in turn.

        Args:
            predicate: a ``traj`` predicate or any ``Trajectory -> bool``; ``None`` keeps all.
            trajectory_key: the entry of trajectory ids (default: looked up).

        Raises:
            TypeError: the storage does not hold TensorDicts, or ``predicate`` is an
                unreduced elementwise comparison.
        """
        check_predicate(predicate)
        with self._lock:
            source, full, cursor = self._query_source()
        if source is None:
            return []
        lines = source if source.batch_dims == 2 else source.unsqueeze(0)  # [envs, T]
        steps = lines.batch_size[1]
        ids, end = split_signal(lines, trajectory_key)
        signal = {"trajectory": ids.T} if ids is not None else {"end": end.T}
        last = (cursor - 1) % steps if full else None
        start, stop, lengths = find_start_stop_traj(**signal, at_capacity=full, cursor=last)
        oldest = cursor % steps if full else 0
        env = start[:, 1]
        order = torch.argsort(env * steps + (start[:, 0] - oldest) % steps)

        read_steps = self._transform.read_steps()
        evaluated, complete = lines, not read_steps
        if predicate is not None:
            evaluated, complete = self._evaluation_data(lines, predicate, read_steps)
        found = []
        for i in order.tolist():
            where = (int(env[i]), int(start[i, 0]), int(stop[i, 0]), int(lengths[i]))
            candidate = None
            if predicate is not None:
                candidate = Trajectory(_cut(evaluated, *where, steps))
                if not predicate(candidate):
                    continue
            if candidate is not None and complete:
                found.append(candidate)
            else:
                found.append(Trajectory(_run(_cut(lines, *where, steps), read_steps)))
        return found

    def _evaluation_data(
        self, lines: TensorDictBase, predicate: Any, read_steps: list[_Step]
    ) -> tuple[TensorDictBase, bool]:
        """What the predicate is evaluated on, and whether it is the full read data."""
        required = getattr(predicate, "required_keys", None)
        required = required() if callable(required) else None
        plan, keys = read_steps, None
        if required is not None:
            needed = {unravel_key(k) for k in required}
            needed |= {("next", k) for k in needed if isinstance(k, str)}
            plan, keys = transform_plan(read_steps, needed)
        data = lines.copy() if keys is None else lines.select(*keys, strict=False)
        return _run(data, plan), keys is None and len(plan) == len(read_steps)

    def _query_source(self) -> tuple[TensorDictBase | None, bool, int]:
        """The stored TensorDicts (``[T]`` or ``[envs, T]``, a view where possible),
        whether the storage is full, and where its next write goes."""
        storage = self._storage
        if len(storage) == 0:
            return None, False, 0
        cursor = storage.last_cursor
        layout = getattr(storage, "layout", None)
        if layout is not None:
            if layout.kind != "tensordict":
                raise TypeError(
                    "query() needs a tensordict-backed storage (TensorDict items); this "
                    f"{type(storage).__name__} holds {layout.kind} data."
                )
            steps = storage.shape[-1]
            data = storage._storage
            data = data[:steps] if storage.ndim == 1 else data[:, :steps]
            return data, steps == storage.write_capacity(None), cursor
        items = storage.get(torch.arange(len(storage)))
        if isinstance(items, list):
            if not all(is_tensor_collection(item) for item in items):
                raise TypeError(
                    "query() needs a tensordict-backed storage: the "
                    f"{type(storage).__name__} holds {type(items[0]).__name__} items."
                )
            items = torch.stack(items)
        return items, len(storage) == storage.max_size, cursor


def _cut(lines: TensorDictBase, env: int, first: int, last: int, length: int, steps: int) -> Any:
    """Steps ``first..last`` of env ``env`` (following the wrap point): a view unless wrapped."""
    if first <= last:
        return lines[env, first : last + 1]
    return lines[env, torch.arange(first, first + length) % steps]
