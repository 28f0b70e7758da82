"""Storage checkpointers: flat, nested and HDF5 folders that restore the buffer exactly."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import (
    FlatStorageCheckpointer,
    H5StorageCheckpointer,
    LazyMemmapStorage,
    LazyTensorStorage,
    NestedStorageCheckpointer,
    ReplayBuffer,
)

needs_h5py = pytest.mark.skipif(
    importlib.util.find_spec("h5py") is None, reason="h5py not installed"
)
H5 = pytest.param(H5StorageCheckpointer, marks=needs_h5py)


def _batch(shape: list[int]) -> TensorDict:
    return TensorDict(
        {"obs": torch.randn(*shape, 3), ("next", "done"): torch.rand(*shape, 1) > 0.5,
         "step": torch.arange(int(torch.tensor(shape).prod())).reshape(shape)},
        shape,
    )  # fmt: skip


@pytest.mark.parametrize(
    "checkpointer", [FlatStorageCheckpointer, NestedStorageCheckpointer, H5StorageCheckpointer]
)
@pytest.mark.parametrize(("storage", "ndim", "shape"), [(LazyTensorStorage, 1, [15]), (LazyMemmapStorage, 1, [5]),
                                                         (LazyTensorStorage, 2, [2, 9])])  # fmt: skip
def test_roundtrip_restores_items_and_cursor(tmp_path, checkpointer, storage, ndim, shape) -> None:
    rb = ReplayBuffer(storage=storage(12, ndim=ndim))
    rb.storage.checkpointer = checkpointer()
    rb.extend(_batch(shape))  # [15] wraps a capacity of 12
    rb.dumps(tmp_path / "ck")
    rb.dumps(tmp_path / "ck")  # dumping twice replaces the first
    other = ReplayBuffer(storage=storage(12, ndim=ndim))
    other.storage.checkpointer = checkpointer()
    other.loads(tmp_path / "ck")
    assert (other[:] == rb[:]).all() and other.writer._cursor == rb.writer._cursor
    more = _batch([*shape[:-1], 2])
    assert torch.equal(other.extend(more), rb.extend(more))
    assert (other[:] == rb[:]).all()


@needs_h5py
def test_formats_on_disk(tmp_path) -> None:
    import h5py

    rb = ReplayBuffer(storage=LazyTensorStorage(4))
    rb.extend(_batch([3]))
    rb.storage.checkpointer = FlatStorageCheckpointer()
    rb.dumps(tmp_path / "flat")
    assert (tmp_path / "flat" / "storage" / "flat" / "next.done.memmap").exists()
    rb.storage.checkpointer = NestedStorageCheckpointer()
    rb.dumps(tmp_path / "nested")
    assert (tmp_path / "nested" / "storage" / "data" / "next" / "done.memmap").exists()
    rb.storage.checkpointer = H5StorageCheckpointer()
    rb.dumps(tmp_path / "h5")
    with h5py.File(tmp_path / "h5" / "storage" / "data.h5") as file:
        assert file["next/done"].shape == (3, 1)


def test_errors(tmp_path, monkeypatch) -> None:
    rb = ReplayBuffer(storage=LazyTensorStorage(4))
    rb.storage.checkpointer = NestedStorageCheckpointer()
    rb.extend(torch.arange(3))
    with pytest.raises(TypeError, match="TensorDicts"):
        rb.dumps(tmp_path / "x")
    with pytest.raises(FileNotFoundError, match="storage_meta"):
        NestedStorageCheckpointer().loads(LazyTensorStorage(4), tmp_path)
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(ImportError, match="h5py"):
        H5StorageCheckpointer()
