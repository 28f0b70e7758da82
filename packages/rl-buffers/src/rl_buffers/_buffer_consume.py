"""Writes of a consuming buffer: freed (consumed) slots first, then the writer's cursor."""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree
from tensordict import is_tensor_collection

from rl_buffers.storages.base import Storage


def _head(data: Any, n: int) -> Any:
    """The first ``n`` items of a batch (a list, tensor, TensorDict or pytree of tensors)."""
    if (
        isinstance(data, list | tuple)
        or is_tensor_collection(data)
        or isinstance(data, torch.Tensor)
    ):
        return data[:n]
    return pytree.tree_map(lambda x: x[:n], data)


def consuming_write(writer: Any, sampler: Any, storage: Storage, data: Any) -> torch.Tensor:
    """Writes ``data`` into the sampler's freed slots, then at the writer's cursor.

    Past the freed slots the cursor goes on as usual, but skips the slots just
    refilled in this batch (they hold new items). Returns the positions written, in order.

    Examples:
        >>> from rl_buffers import LazyTensorStorage, RoundRobinWriter
        >>> from rl_buffers.samplers.consuming import ConsumingSampler
        >>> storage, writer, sampler = LazyTensorStorage(8), RoundRobinWriter(), ConsumingSampler()
        >>> writer.register_storage(storage)
        >>> sampler.extend(writer.extend(torch.arange(8)), storage)
        >>> writer._cursor = 0
        >>> sampler._live_mask[[1, 2]] = False
        >>> sampler._append_free_indices(torch.tensor([1, 2]))
        >>> consuming_write(writer, sampler, storage, torch.arange(6)).tolist()
        [1, 2, 0, 3, 4, 5]
    """
    n = storage.n_items(data)
    free = sampler.take_free(n)
    if not free.numel():
        return writer.extend(data)
    reused = free.numel()
    writer.write_at(free, _head(data, reused))
    positions: list[int] = []
    if n > reused:
        capacity = storage.write_capacity(data)
        skip = set(free.tolist())
        cursor, lap = writer._cursor, 0
        while len(positions) < n - reused:
            if cursor not in skip or lap >= capacity:  # skip refilled slots on the first lap only
                positions.append(cursor)
            cursor, lap = (cursor + 1) % capacity, lap + 1
        writer.write_at(torch.tensor(positions), storage.take(data, reused))
        writer._cursor = cursor
    writer._write_count += n
    return torch.cat([free, torch.tensor(positions, dtype=torch.long)])
