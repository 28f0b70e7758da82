"""The storage protocol shared by every storage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


class Storage:
    """Where a replay buffer keeps its items.

    A storage holds up to ``max_size`` items. Writers call :meth:`set` with the
    positions to write along the write dimension, samplers call :meth:`get`
    with the positions to read. ``ndim`` is the number of leading dims that
    index items (1: ``[N]``; 2: ``[envs, time]``).
    """

    max_size: int
    ndim: int = 1

    def __len__(self) -> int:
        raise NotImplementedError

    def set(self, index: slice | torch.Tensor, data: Any) -> None:
        """Writes ``data`` at positions ``index`` of the write dimension."""
        raise NotImplementedError

    def get(self, index: torch.Tensor) -> Any:
        """Reads the items at ``index`` (``[n]``, or ``[n, ndim]`` coordinates)."""
        raise NotImplementedError

    def n_items(self, data: Any) -> int:
        """How many positions of the write dimension ``data`` fills."""
        raise NotImplementedError

    def write_capacity(self, data: Any) -> int:
        """The number of positions along the write dimension (``max_size`` for 1-d storages)."""
        return self.max_size

    def take(self, data: Any, start: int) -> Any:
        """``data`` from position ``start`` of its write dimension on (drops what cannot fit)."""
        return data[start:]

    def unravel(self, flat: torch.Tensor) -> torch.Tensor:
        """Maps flat ids in ``[0, len(self))`` to storage indices (identity for 1-d storages)."""
        return flat

    @property
    def last_cursor(self) -> int:
        """The position right after the most recent write (where the next write starts)."""
        return getattr(self, "_cursor", 0)

    @property
    def write_count(self) -> int:
        """How many :meth:`set` calls changed the content (for caches of derived values)."""
        return getattr(self, "_write_count", 0)

    def empty(self) -> None:
        """Forgets every item (capacity and layout are kept)."""
        raise NotImplementedError

    def dumps(self, path: Path) -> None:
        """Writes the contents into directory ``path`` (created)."""
        raise NotImplementedError

    def loads(self, path: Path) -> None:
        """Replaces the contents with those written by :meth:`dumps` at ``path``."""
        raise NotImplementedError
