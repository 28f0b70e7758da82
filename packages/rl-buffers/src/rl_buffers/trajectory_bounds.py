"""``find_start_stop_traj``: where trajectories start and stop in storage-order data."""

from __future__ import annotations

import torch


def _cursor_row(cursor: int | torch.Tensor | range) -> int:
    """The last written row named by ``cursor`` (an int, a tensor of rows, or a range)."""
    if isinstance(cursor, range):
        if not len(cursor):
            raise RuntimeError("cursor must not be an empty range: pass the last written row.")
        return int(cursor[-1])
    if isinstance(cursor, torch.Tensor):
        if not cursor.numel():
            raise RuntimeError("cursor must not be an empty tensor: pass the last written row.")
        return int(cursor.reshape(-1)[-1])
    if isinstance(cursor, int):
        return cursor
    raise RuntimeError(f"cursor should be an int, a 1-d tensor or a range; got {type(cursor)}.")


def _end_flags(
    trajectory: torch.Tensor | None,
    end: torch.Tensor | None,
    at_capacity: bool,
    cursor: int | torch.Tensor | range | None,
) -> torch.Tensor:
    """A bool ``[T, *B]`` tensor with every trajectory's last row marked (a new tensor)."""
    if (trajectory is None) == (end is None):
        raise TypeError(
            "Exactly one of `trajectory` (ids) and `end` (end-of-trajectory flags) must be given."
        )
    signal = trajectory if trajectory is not None else end
    if signal.ndim == 0:
        raise RuntimeError("the trajectory signal must have a time dim: got a 0-d tensor.")
    steps = signal.shape[0]
    if steps == 0:
        raise RuntimeError("cannot find trajectories in an empty (T=0) input.")
    if trajectory is not None:
        # the last row ends a trajectory unless the data wraps into row 0 with the same id
        wrap_end = (
            trajectory[-1:] != trajectory[:1]
            if at_capacity
            else torch.ones_like(trajectory[:1], dtype=torch.bool)
        )
        flags = torch.cat([trajectory[1:] != trajectory[:-1], wrap_end])
    else:
        flags = end.to(torch.bool).clone()
        if not at_capacity:
            flags[-1] = True
    if at_capacity:
        if cursor is not None:
            # the data after the newest row was overwritten: its trajectory stops there
            flags[_cursor_row(cursor) % steps] = True
        flags[-1] |= ~flags.any(0)  # a column without any end holds one trajectory
    return flags


def find_start_stop_traj(
    *,
    trajectory: torch.Tensor | None = None,
    end: torch.Tensor | None = None,
    at_capacity: bool,
    cursor: int | torch.Tensor | range | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """First row, last row and length of every trajectory of time-first data (TorchRL's function).

    Args:
        trajectory: trajectory ids ``[T, *B]`` (time first); a trajectory ends where the
            id changes. Exclusive with ``end``.
        end: bool ``[T, *B]``, True on the last step of a trajectory. Exclusive with
            ``trajectory``.
        at_capacity: the storage is full and circular: a trajectory open at row ``T - 1``
            goes on at row 0. Otherwise row ``T - 1`` always ends a trajectory.
        cursor: the last written row (an int, or a tensor / range whose last entry it is);
            with ``at_capacity`` it ends a trajectory, as what followed was overwritten.
        device: where to compute (results come back on the input's device).

    Returns:
        ``(start, stop, lengths)``: ``start`` and ``stop`` are ``[N, 1 + len(B)]`` (row,
        then batch coordinates), sorted by batch coordinates then stop row; ``stop`` is
        inclusive, and ``start > stop`` for a trajectory across the wrap point.

    Raises:
        TypeError: both or neither of ``trajectory`` and ``end`` were given.
        RuntimeError: the input is empty, or ``cursor`` is empty or of a wrong type.

    Examples:
        >>> end = torch.zeros(10, dtype=torch.bool)
        >>> end[2] = end[7] = True
        >>> start, stop, lengths = find_start_stop_traj(end=end, at_capacity=True, cursor=4)
        >>> start.squeeze(-1).tolist(), stop.squeeze(-1).tolist(), lengths.tolist()
        ([8, 3, 5], [2, 4, 7], [5, 2, 3])
    """
    signal = trajectory if trajectory is not None else end
    origin = signal.device if signal is not None else None
    if device is not None:
        trajectory = trajectory.to(device) if trajectory is not None else None
        end = end.to(device) if end is not None else None
    flags = _end_flags(trajectory, end, at_capacity, cursor)
    steps, batch = flags.shape[0], flags.shape[1:]
    columns = flags.reshape(steps, -1).T  # [cols, T]: nonzero() sorts by column, then time
    col, stop_t = columns.nonzero().unbind(-1)
    first = torch.ones_like(col, dtype=torch.bool)
    first[1:] = col[1:] != col[:-1]
    # a column's first trajectory starts after the column's last end (cyclically)
    last_of_col = torch.cumsum(torch.bincount(col, minlength=columns.shape[0]), 0) - 1
    previous = torch.roll(stop_t, 1)
    previous[first] = stop_t[last_of_col[col[first]]]
    start_t = (previous + 1) % steps
    lengths = (stop_t - start_t) % steps + 1
    coords = [c for c in torch.unravel_index(col, batch)] if batch else []
    start = torch.stack([start_t, *coords], -1)
    stop = torch.stack([stop_t, *coords], -1)
    if origin is not None and device is not None:
        start, stop, lengths = start.to(origin), stop.to(origin), lengths.to(origin)
    return start, stop, lengths
