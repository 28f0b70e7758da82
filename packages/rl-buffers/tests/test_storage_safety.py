"""Storage safety: bounds of 2-d indexing, batch sizes, RAM admission with live
reservations and cgroup limits, checkpoint checksums and orphaned partial dumps."""

from __future__ import annotations

import gc
import json
import os
import time

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rl_buffers import (
    CheckpointCorruptError,
    LazyMemmapStorage,
    LazyTensorStorage,
    NestedStorageCheckpointer,
    PrioritizedSampler,
    ReplayBuffer,
    StorageMemoryError,
    _memory,
)
from rl_buffers import _checkpoint_files as files


def _grid_buffer() -> ReplayBuffer:
    """A [4 envs, 10 steps] storage holding 5 steps: obs = 10 * env + t."""
    rb = ReplayBuffer(storage=LazyTensorStorage(40, ndim=2))
    obs = (10 * torch.arange(4.0).unsqueeze(1) + torch.arange(5.0)).contiguous()
    rb.extend(TensorDict(obs=obs, batch_size=[4, 5]))
    return rb


# -- 2-d indexing ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pairs", "match"),
    [
        ([[0, 9]], r"time index \[9\] out of range; valid time indices are \[0, 5\)"),
        ([[0, 5]], r"time index \[5\] out of range"),
        ([[0, -6]], r"time index \[-6\] out of range"),
        ([[4, 0]], r"env index \[4\] out of range; valid env indices are \[0, 4\)"),
        ([[0, 1, 2]], r"pairs of shape \[\.\.\., 2\]; got shape \(1, 3\)"),
        ([[0.0, 1.0]], r"integer \(env, time\) pairs; got a torch.float32"),
    ],
)
def test_2d_index_outside_the_written_range_raises(pairs, match) -> None:
    with pytest.raises(IndexError, match=match):
        _grid_buffer()[torch.tensor(pairs)]


def test_2d_negative_index_counts_from_the_last_written_step() -> None:
    rb = _grid_buffer()
    got = rb[torch.tensor([[0, -1], [-1, 0], [2, 3]])]["obs"]
    assert got.tolist() == [4.0, 30.0, 23.0]  # not the unwritten slot 9 of env 0


# -- batch sizes -----------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_non_positive_or_non_int_batch_size_raises(bad) -> None:
    with pytest.raises(
        ValueError, match=r"ReplayBuffer\(batch_size=\.\.\.\) must be a positive int"
    ):
        ReplayBuffer(storage=LazyTensorStorage(10), batch_size=bad)
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(torch.arange(5.0))
    with pytest.raises(
        ValueError, match=rf"sample\(batch_size\) must be a positive int.*got {bad!r}"
    ):
        rb.sample(bad)


def test_numpy_int_batch_size_is_accepted() -> None:
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=np.int64(3))
    rb.extend(torch.arange(5.0))
    assert rb.sample().shape == (3,) and rb.sample(np.int32(2)).shape == (2,)


# -- RAM admission -----------------------------------------------------------------------
def _fill_one(storage: LazyTensorStorage) -> None:
    storage.set(slice(0, 1), torch.zeros(1, dtype=torch.uint8))


def test_ram_admission_counts_live_unfilled_storages(monkeypatch) -> None:
    monkeypatch.setattr(_memory, "_mem_available", lambda: 100 * 2**20)
    monkeypatch.setattr(_memory, "cgroup_room", lambda: None)
    first = LazyTensorStorage(60 * 2**20)  # uint8 items: 60 MiB, untouched
    _fill_one(first)
    second = LazyTensorStorage(60 * 2**20)
    with pytest.raises(StorageMemoryError, match="reserved by live storages of this process"):
        _fill_one(second)
    del first
    gc.collect()  # the first storage's reservation ends with it
    _fill_one(second)
    assert len(second) == 1


def test_ram_admission_does_not_count_written_pages_twice(monkeypatch) -> None:
    monkeypatch.setattr(_memory, "cgroup_room", lambda: None)
    first = LazyTensorStorage(40 * 2**20)
    first.set(slice(0, 40 * 2**20), torch.zeros(40 * 2**20, dtype=torch.uint8))  # all resident
    assert _memory.outstanding_bytes(_memory.ram_pool()) < 2**20
    del first
    gc.collect()


def test_available_ram_is_capped_by_the_cgroup_limit(monkeypatch) -> None:
    monkeypatch.setattr(_memory, "_mem_available", lambda: 2**40)
    monkeypatch.setattr(_memory, "cgroup_room", lambda: 10 * 2**20)
    assert _memory.available_bytes(torch.device("cpu")) == 10 * 2**20
    with pytest.raises(StorageMemoryError, match="cgroup limit included"):
        _fill_one(LazyTensorStorage(20 * 2**20))


def _cgroup_tree(tmp_path, proc_line: str, files_by_dir: dict[str, dict[str, str]]):
    proc = tmp_path / "cgroup"
    proc.write_text(proc_line + "\n")
    root = tmp_path / "sys"
    for rel, entries in files_by_dir.items():
        d = root / rel
        d.mkdir(parents=True, exist_ok=True)
        for name, text in entries.items():
            (d / name).write_text(text)
    return proc, root


def test_cgroup_v2_limit_minus_usage_and_reclaimable_cache(tmp_path) -> None:
    proc, root = _cgroup_tree(tmp_path, "0::/job/step", {
        "job/step": {"memory.max": "max", "memory.current": "100"},
        "job": {"memory.max": str(50 * 2**20), "memory.current": str(30 * 2**20),
                "memory.stat": f"anon 1\ninactive_file {10 * 2**20}\n"},
    })  # fmt: skip
    assert _memory.cgroup_room(proc, root) == 30 * 2**20  # the ancestor's limit applies


def test_cgroup_v1_memory_controller_limit(tmp_path) -> None:
    proc, root = _cgroup_tree(tmp_path, "4:memory:/box\n3:cpu:/", {
        "memory/box": {"memory.limit_in_bytes": str(64 * 2**20),
                       "memory.usage_in_bytes": str(16 * 2**20)},
        "memory": {"memory.limit_in_bytes": "9223372036854771712"},
    })  # fmt: skip
    assert _memory.cgroup_room(proc, root) == 48 * 2**20


def test_cgroup_without_limit_is_none(tmp_path) -> None:
    proc, root = _cgroup_tree(tmp_path, "0::/", {"": {"memory.max": "max"}})
    assert _memory.cgroup_room(proc, root) is None


# -- checkpoint integrity ------------------------------------------------------------------
def _dumped(tmp_path, storage=None) -> tuple[ReplayBuffer, os.PathLike]:
    rb = ReplayBuffer(storage=storage if storage is not None else LazyTensorStorage(10))
    rb.extend(TensorDict(obs=torch.arange(15.0).reshape(5, 3), batch_size=[5]))
    path = tmp_path / "ckpt"
    rb.dumps(path)
    return rb, path


def _fresh() -> ReplayBuffer:
    return ReplayBuffer(storage=LazyTensorStorage(10))


def test_flipped_byte_in_a_checkpoint_names_the_file(tmp_path) -> None:
    _, path = _dumped(tmp_path)
    target = path / "storage" / "tensor_storage.pt"
    raw = bytearray(target.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    target.write_bytes(bytes(raw))
    with pytest.raises(
        CheckpointCorruptError, match=r"tensor_storage\.pt' does not match its SHA-256"
    ):
        _fresh().loads(path)


@pytest.mark.parametrize("name", ["buffer.pt", "storage/tensor_storage.pt"])
def test_truncated_checkpoint_file_names_the_file(tmp_path, name) -> None:
    _, path = _dumped(tmp_path)
    target = path / name
    target.write_bytes(target.read_bytes()[:100])
    with pytest.raises(CheckpointCorruptError, match=rf"{name.split('/')[-1]}' has 100 bytes"):
        _fresh().loads(path)


def test_missing_checkpoint_file_is_named(tmp_path) -> None:
    _, path = _dumped(tmp_path)
    (path / "storage" / "tensor_storage.pt").unlink()
    with pytest.raises(CheckpointCorruptError, match=r"'storage/tensor_storage\.pt' is missing"):
        _fresh().loads(path)


def test_corrupted_nested_checkpointer_memmap_is_caught(tmp_path) -> None:
    storage = LazyTensorStorage(10)
    storage.checkpointer = NestedStorageCheckpointer()
    _, path = _dumped(tmp_path, storage)
    leaf = next((path / "storage").rglob("obs.memmap"))
    raw = bytearray(leaf.read_bytes())
    raw[0] ^= 0x01  # a value off by one bit: torch would load it without complaint
    leaf.write_bytes(bytes(raw))
    other = LazyTensorStorage(10)
    other.checkpointer = NestedStorageCheckpointer()
    with pytest.raises(CheckpointCorruptError, match=r"obs\.memmap' does not match"):
        ReplayBuffer(storage=other).loads(path)


def test_checkpoint_without_manifest_warns_and_a_truncated_one_is_clear(tmp_path) -> None:
    rb, path = _dumped(tmp_path)
    (path / files.MANIFEST).unlink()
    with pytest.warns(UserWarning, match="cannot be verified"):
        (fresh := _fresh()).loads(path)
    assert torch.equal(fresh[:]["obs"], rb[:]["obs"])
    target = path / "storage" / "tensor_storage.pt"
    target.write_bytes(target.read_bytes()[:-50])
    with (
        pytest.warns(UserWarning, match="cannot be verified"),
        pytest.raises(CheckpointCorruptError, match="truncated or corrupted"),
    ):
        _fresh().loads(path)


def test_unreadable_manifest_raises(tmp_path) -> None:
    _, path = _dumped(tmp_path)
    (path / files.MANIFEST).write_text("{not json")
    with pytest.raises(CheckpointCorruptError, match=r"manifest\.json is unreadable"):
        _fresh().loads(path)


def test_loading_another_capacity_changes_nothing(tmp_path) -> None:
    _, path = _dumped(tmp_path)
    other = ReplayBuffer(storage=LazyTensorStorage(20))
    other.extend(TensorDict(obs=torch.ones(2, 3), batch_size=[2]))
    with pytest.raises(ValueError, match="max_size=10, ndim=1; this buffer's has max_size=20"):
        other.loads(path)
    assert other[:]["obs"].tolist() == [[1.0] * 3] * 2


def test_loading_into_a_prioritized_sampler_of_another_capacity_changes_nothing(tmp_path) -> None:
    rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=PrioritizedSampler(10, 0.7, 0.5))
    rb.extend(TensorDict(obs=torch.zeros(4, 3), batch_size=[4]))
    rb.dumps(tmp_path / "ckpt")
    other = ReplayBuffer(storage=LazyTensorStorage(10), sampler=PrioritizedSampler(20, 0.7, 0.5))
    other.extend(TensorDict(obs=torch.ones(2, 3), batch_size=[2]))
    with pytest.raises(ValueError, match="max_capacity must match"):
        other.loads(tmp_path / "ckpt")
    assert len(other) == 2 and other[:]["obs"].sum() == 6.0


# -- orphaned partial dumps -------------------------------------------------------------------
def _orphan(tmp_path, host: str, pid: int, age_s: float = 0.0):
    d = tmp_path / f".ckpt.partial-{host}-{pid}-{int(age_s)}x"
    (d / "storage").mkdir(parents=True)
    (d / "storage" / "tensor_storage.pt").write_bytes(b"x" * 100)
    if age_s:
        t = time.time() - age_s
        os.utime(d, (t, t))
    return d


def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(proc.stdout)  # exited: its pid is free (reuse within the test is negligible)


def test_next_dump_removes_partials_of_dead_writers_only(tmp_path) -> None:
    here = files._host()
    dead = _orphan(tmp_path, here, _dead_pid())
    alive = _orphan(tmp_path, here, os.getppid())  # a running process: maybe still writing
    stale_remote = _orphan(tmp_path, "otherhost", 1, age_s=files.STALE_AFTER_S + 60)
    fresh_remote = _orphan(tmp_path, "otherhost", 1)
    unrelated = tmp_path / ".other.partial-x-1-abc"
    unrelated.mkdir()
    _dumped(tmp_path)
    assert not dead.exists() and not stale_remote.exists()
    assert alive.exists() and fresh_remote.exists() and unrelated.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".ckpt")) == sorted(
        [alive.name, fresh_remote.name]
    )


def test_dump_leaves_only_the_checkpoint_and_its_manifest_lists_every_file(tmp_path) -> None:
    _, path = _dumped(tmp_path, LazyMemmapStorage(10, scratch_dir=tmp_path / "scratch"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "scratch"]
    listed = json.loads((path / files.MANIFEST).read_text())["files"]
    on_disk = {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()}
    assert set(listed) == on_disk - {files.MANIFEST}
