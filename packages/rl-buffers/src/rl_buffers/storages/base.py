"""The storage protocol shared by every storage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree
from tensordict import is_tensor_collection


def _first(data: Any) -> Any:
    """Item 0 of a batch read by :meth:`Storage.get` (a list, tensor, TensorDict or pytree)."""
    if isinstance(data, list) or is_tensor_collection(data) or isinstance(data, torch.Tensor):
        return data[0]
    return pytree.tree_map(lambda x: x[0], data)


def _reshape(data: Any, shape: torch.Size) -> Any:
    if isinstance(data, list) or len(shape) == 1:
        return data
    if is_tensor_collection(data) or isinstance(data, torch.Tensor):
        return data.reshape(*shape, *data.shape[1:])
    return pytree.tree_map(lambda x: x.reshape(*shape, *x.shape[1:]), data)


class Storage:
    """Where a replay buffer keeps its items.

    A storage holds up to ``max_size`` items. Writers call :meth:`set` with the
    positions to write along the write dimension, samplers call :meth:`get`
    with the positions to read. ``ndim`` is the number of leading dims that
    index items (1: ``[N]``; 2: ``[envs, time]``).
    """

    max_size: int
    ndim: int = 1
    _rng: torch.Generator | None = None  # set by ReplayBuffer.set_rng (TorchRL's attribute)
    _compilable: bool = False
    # The on-disk format of dumps / loads (rl_buffers.checkpointers); None: the storage's own.
    checkpointer: Any = None

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def compilable(self) -> bool:
        """The ``compilable=`` flag given at construction (TorchRL's argument).

        Storages here keep no multiprocessing bookkeeping (TorchRL's ``mp.Value``
        cursors are what its flag replaces), so every one reads the same way under
        ``torch.compile``; the flag is kept for ported code.
        """
        return self._compilable

    def __getitem__(self, item: Any) -> Any:
        """Items by position over the filled range (``[len]``, or ``[envs, time]`` for 2-d
        storages): an int gives one item, a slice, list or tensor a batch.

        Examples:
            >>> from rl_buffers import ListStorage
            >>> storage = ListStorage(5)
            >>> storage.set(torch.arange(3), ["a", "b", "c"])
            >>> storage[1], storage[1:], list(storage)
            ('b', ['b', 'c'], ['a', 'b', 'c'])
        """
        n = len(self)
        shape = getattr(self, "shape", torch.Size([n])) if self.ndim == 2 else torch.Size([n])
        try:
            flat = torch.arange(n).reshape(shape)[item]
        except IndexError as error:
            raise IndexError(
                f"{type(self).__name__} of shape {tuple(shape)}: index {item!r} is out of range ({error})."
            ) from error
        data = self.get(self.unravel(flat.reshape(-1)))
        if flat.ndim == 0:
            return _first(data)
        return _reshape(data, flat.shape)

    def __iter__(self) -> Any:
        """Yields the stored items one by one (in flat order for 2-d storages)."""
        for i in range(len(self)):
            yield _first(self.get(self.unravel(torch.tensor([i]))))

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
