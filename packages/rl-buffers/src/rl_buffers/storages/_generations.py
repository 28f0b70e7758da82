"""Slot generations: how many times each storage slot was (re)written, kept on the storage.

A sampled ``(index, generation)`` pair is a handle to one stored record: once the
slot is overwritten (or the buffer emptied) its generation moves on and the handle
is stale. Stamps live on the storage, so every writer of a shared storage moves
them, and they stay ``None`` (no cost) until a writer asks for them. Slots are
positions along the write dim (time for ``[envs, time]`` storages); ``-1`` means
never written.
"""

from __future__ import annotations

from typing import Any

import torch

_ATTR = "_slot_generations"


def enable(storage: Any) -> None:
    """Starts tracking on ``storage`` (idempotent; the table grows on the first write)."""
    if getattr(storage, _ATTR, None) is None:
        setattr(storage, _ATTR, torch.full((0,), -1, dtype=torch.int64, device=_device(storage)))


def table(storage: Any) -> torch.Tensor | None:
    """The stamps of ``storage`` (``None`` when nothing tracks it)."""
    return getattr(storage, _ATTR, None)


def set_table(storage: Any, stamps: torch.Tensor) -> None:
    """Replaces the stamps (checkpoint loading), on the storage's device."""
    setattr(storage, _ATTR, stamps.to(device=_device(storage), dtype=torch.int64).clone())


def _device(storage: Any) -> torch.device:
    return torch.device(getattr(storage, "device", None) or "cpu")


def bump(storage: Any, positions: torch.Tensor, capacity: int) -> None:
    """Counts one write per entry of ``positions`` (a slot written twice in a batch moves by 2)."""
    stamps = table(storage)
    if stamps is None or not positions.numel():
        return
    if stamps.numel() < capacity:
        grown = torch.full((capacity,), -1, dtype=torch.int64, device=stamps.device)
        grown[: stamps.numel()] = stamps
        stamps = grown
        setattr(storage, _ATTR, stamps)
    positions = positions.reshape(-1).to(stamps.device)
    stamps += torch.bincount(positions, minlength=stamps.numel())


def age(storage: Any) -> None:
    """Invalidates every written slot (the storage was emptied); unwritten ones stay ``-1``."""
    stamps = table(storage)
    if stamps is not None:
        stamps[stamps >= 0] += 1


def slots(index: Any, ndim: int) -> torch.Tensor:
    """Write-dim positions named by ``index``: ``[n]`` slots, ``[n, 2]`` (env, time)
    pairs of a 2-d storage, or a tuple of coordinates (its last one is the slot)."""
    if isinstance(index, tuple):
        return torch.as_tensor(index[-1] if ndim == 2 else index[0])
    index = torch.as_tensor(index)
    if ndim == 2 and index.ndim == 2 and index.shape[-1] == 2:
        return index[..., 1]
    return index


def lookup(storage: Any, index: Any) -> torch.Tensor:
    """The stamps at ``index`` (see :func:`slots`); ``-1`` for unwritten, out-of-range or untracked."""
    where = slots(index, getattr(storage, "ndim", 1)).to(torch.int64)
    stamps = table(storage)
    if stamps is None:
        return torch.full(where.shape, -1, dtype=torch.int64, device=where.device)
    inside = (where >= 0) & (where < stamps.numel())
    safe = where.clamp(0, max(stamps.numel() - 1, 0)).to(stamps.device)
    found = stamps[safe] if stamps.numel() else torch.full(where.shape, -1, dtype=torch.int64)
    return torch.where(inside.to(found.device), found, -1).to(where.device)
