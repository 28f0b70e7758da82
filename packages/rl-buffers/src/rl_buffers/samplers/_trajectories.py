"""Locating trajectories in a storage: pure functions over flags and ids."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rl_buffers._layout import NestedKey
from rl_buffers.storages.base import Storage


@dataclass
class Trajectories:
    """Trajectories as ``[start, start + length)`` runs of flat positions.

    Flat positions run over ``[0, len(storage))`` in storage order (row-major
    ``[envs, time]`` for 2-d storages): ``storage.unravel(flat)`` gives indices.
    """

    start: torch.Tensor
    length: torch.Tensor
    traj_of: torch.Tensor  # [len] trajectory number of every flat position


def ends_from_flags(done: torch.Tensor, cursor: int, full: bool) -> torch.Tensor:
    """Marks trajectory ends on one time line ``[T]``: done steps, the last step and the write seam.

    Args:
        done: bool ``[T]``, True on the last step of an episode.
        cursor: the position the next write starts at.
        full: whether the line has wrapped (then ``cursor - 1`` is the newest item,
            and ``cursor`` starts the oldest surviving one).

    Examples:
        >>> ends_from_flags(torch.tensor([False, True, False, False]), cursor=4, full=False).tolist()
        [False, True, False, True]
    """
    end = done.clone()
    end[-1] = True
    if full and cursor > 0:
        end[cursor - 1] = True
    return end


def ends_from_ids(ids: torch.Tensor, cursor: int, full: bool) -> torch.Tensor:
    """Marks trajectory ends where the id changes along a time line ``[T]`` (plus the seams)."""
    end = torch.zeros(ids.shape, dtype=torch.bool)
    end[:-1] = ids[1:] != ids[:-1]
    return ends_from_flags(end, cursor, full)


def locate(
    storage: Storage, *, end_key: NestedKey | None, traj_key: NestedKey | None
) -> Trajectories:
    """Finds the trajectories stored in a tensor storage from ``end_key`` flags or ``traj_key`` ids."""
    key = traj_key if traj_key is not None else end_key
    values = storage.get_leaf(key).cpu()
    if storage.ndim == 1:
        values = values.unsqueeze(0)
    rows, steps = values.shape[0], values.shape[1]
    values = values.reshape(rows, steps, -1)
    full = steps == storage.write_capacity(None)
    lines = []
    for r in range(rows):
        if traj_key is not None:
            lines.append(ends_from_ids(values[r, :, 0], storage.last_cursor, full))
        else:
            lines.append(ends_from_flags(values[r].any(-1), storage.last_cursor, full))
    end = torch.cat(lines)
    end_pos = end.nonzero().squeeze(-1)
    start = torch.cat([torch.zeros(1, dtype=torch.long), end_pos[:-1] + 1])
    length = end_pos - start + 1
    traj_of = torch.repeat_interleave(torch.arange(start.numel()), length)
    return Trajectories(start, length, traj_of)
