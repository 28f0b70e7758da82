"""Storages: where replay buffers keep their items."""

from rl_buffers.storages.base import Storage
from rl_buffers.storages.compressed_list_storage import CompressedListStorage
from rl_buffers.storages.lazy_stack_storage import LazyStackStorage
from rl_buffers.storages.list_storage import ListStorage
from rl_buffers.storages.memmap_storage import LazyMemmapStorage
from rl_buffers.storages.tensor_storage import LazyTensorStorage, TensorStorage

__all__ = [
    "CompressedListStorage",
    "LazyMemmapStorage",
    "LazyStackStorage",
    "LazyTensorStorage",
    "ListStorage",
    "Storage",
    "TensorStorage",
]
