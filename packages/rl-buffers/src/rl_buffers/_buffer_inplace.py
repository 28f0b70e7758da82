"""In-place rewrites of stored items, mixed into :class:`~rl_buffers.ReplayBuffer`."""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree
from tensordict import is_tensor_collection

from rl_buffers.storages.list_storage import ListStorage


def unsqueeze(data: Any, dim: int) -> Any:
    """``data`` with a new dim at ``dim`` (tensors, TensorDicts, pytrees of tensors)."""
    if is_tensor_collection(data) or isinstance(data, torch.Tensor):
        return data.unsqueeze(dim)
    return pytree.tree_map(lambda x: x.unsqueeze(dim), data)


class InPlaceWrites:
    """``rb[i] = item``, ``set_at_``, ``set_`` and ``update_`` (TorchRL's names).

    Each is a write: the prefetched batches are dropped and the storage's write
    counter moves, so caches derived from the contents are rebuilt.

    Examples:
        >>> import torch
        >>> from rl_buffers import LazyTensorStorage, ReplayBuffer
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(4))
        >>> _ = rb.extend(torch.zeros(3))
        >>> rb[1] = torch.tensor(5.0)
        >>> rb[:].tolist()
        [0.0, 5.0, 0.0]
    """

    def __setitem__(self, index: Any, value: Any) -> None:
        """Overwrites stored items in place: ``rb[2:4] = data`` (a write: caches are refreshed)."""
        with self._lock:
            if isinstance(index, int):
                index = torch.tensor([index % max(len(self), 1)])
                value = (
                    unsqueeze(value, 0) if not isinstance(self._storage, ListStorage) else [value]
                )
            elif isinstance(index, slice):
                index = torch.arange(len(self))[index]
            index = torch.as_tensor(index)
            if self._storage.ndim == 1 and bool(((index < 0) | (index >= len(self))).any()):
                raise IndexError(
                    f"{type(self).__name__} holds {len(self)} items; got positions {index.tolist()}."
                )
            self._futures.clear()
            self._storage.set(index, value)

    def read_all_in_order(self, end: int | None = None) -> Any:
        """The stored items in storage order, all or the first ``end`` (``rb[:end]``)."""
        return self[:] if end is None else self[:end]

    def write_all(self, data: Any, end: int | None = None) -> None:
        """Overwrites the first ``end`` stored items (default: as many as ``data`` holds) with
        ``data``, in storage order (``rb[:end] = data``): e.g. after computing value targets
        over :meth:`read_all_in_order`'s result. The keys must be the stored ones.

        Examples:
            >>> import torch
            >>> from rl_buffers import LazyTensorStorage, ReplayBuffer
            >>> rb = ReplayBuffer(storage=LazyTensorStorage(4))
            >>> _ = rb.extend(torch.zeros(3))
            >>> rb.write_all(rb.read_all_in_order(end=2) + 1, end=2)
            >>> rb[:].tolist()
            [1.0, 1.0, 0.0]
        """
        if end is None:
            end = (
                data.shape[0]
                if isinstance(data, torch.Tensor) or is_tensor_collection(data)
                else len(data)
            )
        self[:end] = data

    def set_at_(self, key: Any, value: torch.Tensor, index: Any) -> None:
        """Overwrites entry ``key`` of the items at ``index``, in place (TensorDict storages)."""
        with self._lock:
            self._futures.clear()
            self._leaf_writer().set_leaf_(key, value, index)

    def set_(self, key: Any, value: torch.Tensor) -> None:
        """Overwrites entry ``key`` of every stored item, in place (TensorDict storages)."""
        with self._lock:
            self._futures.clear()
            self._leaf_writer().set_leaf_(key, value)

    def update_(self, data: Any) -> None:
        """Overwrites every entry of ``data`` (a TensorDict of all stored items), in place."""
        with self._lock:
            self._futures.clear()
            storage = self._leaf_writer()
            for key in data.keys(include_nested=True, leaves_only=True):
                storage.set_leaf_(key, data.get(key))

    def _leaf_writer(self) -> Any:
        if not hasattr(self._storage, "set_leaf_"):
            raise TypeError(
                f"in-place entry writes need a tensor storage (LazyTensorStorage, LazyMemmapStorage); "
                f"this buffer has a {type(self._storage).__name__}."
            )
        return self._storage
