"""Faults of rl-buffers: full disks, killed dumps, bad priorities, bad writes and batch sizes.

Full-disk cases run on a private tmpfs of a few MiB mounted for the test (root, or
a user namespace that allows it). Where mounting is refused they run on an
emulated small disk instead: ``shutil.disk_usage`` reports the quota and
``os.posix_fallocate`` / ``torch.save`` fail with ``ENOSPC`` past it.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import time
import warnings
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    NoSpaceError,
    PrioritizedSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    SliceSampler,
    StorageMemoryError,
    TensorDictPrioritizedReplayBuffer,
)

MiB = 2**20


class SmallDisk:
    """A directory on a disk of ``size`` bytes: a real tmpfs, or an emulated one."""

    def __init__(self, root: Path, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
        self.path, self.size, self.mounted = root, size, False
        root.mkdir()
        cmd = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(root)]
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=10)
            self.mounted = done.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            self.mounted = False
        if not self.mounted:
            self._emulate(monkeypatch)

    def used(self) -> int:
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())

    def _emulate(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_usage, real_fallocate, real_save = shutil.disk_usage, os.posix_fallocate, torch.save
        inside = lambda p: str(Path(p).resolve()).startswith(str(self.path.resolve()))  # noqa: E731

        def disk_usage(p):
            if inside(p):
                return shutil._ntuple_diskusage(self.size, self.used(), self.size - self.used())
            return real_usage(p)

        def posix_fallocate(fd, offset, length):
            if inside(os.readlink(f"/proc/self/fd/{fd}")) and self.used() + length > self.size:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_fallocate(fd, offset, length)

        def save(obj, f, *args, **kwargs):
            real_save(obj, f, *args, **kwargs)
            if isinstance(f, str | Path) and inside(f) and self.used() > self.size:
                Path(f).write_bytes(b"")
                raise RuntimeError("[enforce fail at inline_container.cc:671] . unexpected pos")

        monkeypatch.setattr(shutil, "disk_usage", disk_usage)
        monkeypatch.setattr(os, "posix_fallocate", posix_fallocate)
        monkeypatch.setattr(torch, "save", save)

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, timeout=10)


@pytest.fixture
def small_disk(tmp_path, monkeypatch):
    disks: list[SmallDisk] = []

    def make(size: int, name: str = "disk") -> SmallDisk:
        disk = SmallDisk(tmp_path / name, size, monkeypatch)
        disks.append(disk)
        return disk

    yield make
    for disk in disks:
        disk.close()


def _bytes_td(n: int) -> TensorDict:
    return TensorDict(x=torch.ones(n, dtype=torch.uint8), batch_size=[n])


# -- memory-mapped storages on a full disk ---------------------------------------------------
def test_second_memmap_storage_on_a_full_disk_is_refused_at_creation(small_disk) -> None:
    disk = small_disk(8 * MiB)
    first = LazyMemmapStorage(5 * MiB, scratch_dir=disk.path / "a")
    first.set(slice(0, 1), _bytes_td(1))
    second = LazyMemmapStorage(5 * MiB, scratch_dir=disk.path / "b")
    with pytest.raises(StorageMemoryError, match=r"no space left on .*b: needed 5\.0 MiB"):
        second.set(slice(0, 1), _bytes_td(1))
    assert list((disk.path / "b").iterdir()) == []
    first.set(slice(0, 5 * MiB), _bytes_td(5 * MiB))  # its blocks are reserved: fills whole
    assert int(first.get(torch.tensor([5 * MiB - 1]))["x"]) == 1


def test_memmap_reservation_failure_is_clear_and_leaves_no_file(small_disk) -> None:
    disk = small_disk(4 * MiB)
    storage = LazyMemmapStorage(3 * MiB, scratch_dir=disk.path / "s", check_memory=False)
    data = TensorDict(a=torch.ones(2, dtype=torch.uint8), b=torch.ones(2, dtype=torch.uint8),
                      batch_size=[2])  # fmt: skip
    with pytest.raises(StorageMemoryError, match=r"no space left on .*: needed 3\.0 MiB"):
        storage.set(slice(0, 2), data)  # leaf a fits, leaf b does not
    assert [p.name for p in (disk.path / "s").iterdir()] == []


def _in_child(body, timeout_s: float = 60.0) -> int:
    """Runs ``body()`` in a forked child (modules already imported: no second torch start-up);
    returns its wait status as ``subprocess`` does (``-signal`` if a signal killed it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() in a threaded process
        pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            torch.set_num_threads(1)  # the parent's OpenMP pool does not survive fork()
            body()
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"the child did not finish in {timeout_s} s (killed)")


def test_filling_memmap_storages_past_the_disk_never_kills_the_process(tmp_path) -> None:
    """Before: both sparse files were accepted on a too small disk and filling the second
    died of SIGBUS. Run in a child so that a regression fails, not kills, pytest."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)],
                           capture_output=True)  # fmt: skip
    if mount.returncode != 0:
        pytest.skip(
            f"needs a real small filesystem to observe SIGBUS; mount refused: {mount.stderr!r}"
        )
    n = 5 * MiB

    def fill_both() -> None:
        made = []
        for name in "ab":
            storage = LazyMemmapStorage(n, scratch_dir=disk / name)
            try:
                storage.set(slice(0, 1), _bytes_td(1))
                made.append(storage)
            except StorageMemoryError:
                (disk / f"refused-{name}").touch()
        for storage in made:
            storage.set(slice(0, n), _bytes_td(n))

    try:
        status = _in_child(fill_both)
        refused = sorted(p.name for p in disk.glob("refused-*"))
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
    assert status == 0, f"the child ended with {status} (SIGBUS is -{signal.SIGBUS})"
    assert refused == ["refused-b"]


# -- checkpoints on a full disk -------------------------------------------------------------
def _buffer(n: int) -> ReplayBuffer:
    rb = ReplayBuffer(storage=LazyTensorStorage(n))
    rb.extend(_bytes_td(n))
    return rb


def test_dump_larger_than_the_disk_is_refused_before_writing(small_disk) -> None:
    disk = small_disk(2 * MiB)
    small = ReplayBuffer(storage=LazyTensorStorage(4 * MiB))
    small.extend(_bytes_td(1000))
    small.dumps(disk.path / "ckpt")  # a first, good checkpoint
    big = _buffer(4 * MiB)
    with pytest.raises(NoSpaceError, match=r"no space left on .*: needed 4\.0 MiB .*, free") as err:
        big.dumps(disk.path / "ckpt")
    assert err.value.errno == errno.ENOSPC
    assert sorted(p.name for p in disk.path.iterdir()) == ["ckpt"]  # no temporaries
    restored = ReplayBuffer(storage=LazyTensorStorage(4 * MiB))
    restored.loads(disk.path / "ckpt")
    assert len(restored) == 1000  # the previous checkpoint is intact


def test_disk_filling_up_during_a_dump_is_translated_and_cleaned(small_disk, monkeypatch) -> None:
    """The size estimate can be short (a ListStorage, another writer filling the disk):
    torch's own ``unexpected pos`` failure becomes the clear error, and nothing is left."""
    disk = small_disk(2 * MiB)
    rb = _buffer(3 * MiB)
    monkeypatch.setattr(type(rb), "_dump_bytes", lambda self: 0)  # the pre-check sees room
    with pytest.raises(NoSpaceError, match=r"no space left on .*: free some space") as err:
        rb.dumps(disk.path / "ckpt")
    assert isinstance(err.value.__cause__, RuntimeError | OSError)
    assert list(disk.path.iterdir()) == []


def test_list_storage_dump_on_a_full_disk_is_clear(small_disk) -> None:
    disk = small_disk(1 * MiB)
    rb = ReplayBuffer(storage=ListStorage(10))
    rb.extend([torch.ones(300_000, dtype=torch.uint8) for _ in range(5)])
    with pytest.raises(NoSpaceError, match="no space left on"):
        rb.dumps(disk.path / "ckpt")
    assert list(disk.path.iterdir()) == []


# -- killed dumps ---------------------------------------------------------------------------
def test_partial_dump_of_a_killed_process_is_removed_by_the_next_dump(
    tmp_path, monkeypatch
) -> None:
    rb = _buffer(1000)
    real_save = torch.save

    def save_then_die(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        if str(f).endswith("buffer.pt"):  # storage written, manifest not: killed here
            os.kill(os.getpid(), signal.SIGKILL)

    def dump_and_die() -> None:
        monkeypatch.setattr(torch, "save", save_then_die)
        rb.dumps(tmp_path / "ckpt")

    assert _in_child(dump_and_die) == -signal.SIGKILL
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".ckpt.partial-"), left
    _buffer(10).dumps(tmp_path / "ckpt")
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


# -- priorities -------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), -1.0])
def test_non_finite_or_negative_priority_update_raises(bad) -> None:
    rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=PrioritizedSampler(10, 0.7, 0.5))
    rb.extend(_bytes_td(5))
    with pytest.raises(
        ValueError, match=r"priorities must be finite and >= 0.*No priority was updated"
    ):
        rb.update_priority(torch.arange(2), torch.tensor([bad, 1.0]))
    assert torch.isfinite(rb.sample(8, return_info=True)[1]["priority_weight"]).all()


def test_nan_td_error_written_with_the_data_raises() -> None:
    rb = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(10),
                                           priority_key="td_error")  # fmt: skip
    data = _bytes_td(3)
    data["td_error"] = torch.tensor([1.0, float("nan"), 1.0])
    with pytest.raises(ValueError, match="priorities must be finite"):
        rb.extend(data)


# -- sampling -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sampler",
    [
        None,
        lambda: PrioritizedSampler(10, 0.7, 0.5),
        SamplerWithoutReplacement,
        lambda: SliceSampler(num_slices=2),
    ],
)
def test_sampling_an_empty_buffer_raises(sampler) -> None:
    rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=sampler() if sampler else None)
    with pytest.raises(RuntimeError, match=r"Cannot sample from an empty storage.*extend it first"):
        rb.sample(4)


@pytest.mark.parametrize("bad", [0, -3])
def test_zero_or_negative_batch_size_raises(bad) -> None:
    rb = _buffer(10)
    with pytest.raises(ValueError, match=rf"must be a positive int.*got {bad}"):
        rb.sample(bad)
    with pytest.raises(ValueError, match=rf"must be a positive int.*got {bad}"):
        ReplayBuffer(storage=LazyTensorStorage(10), batch_size=bad)


def test_2d_index_past_the_written_steps_raises() -> None:
    rb = ReplayBuffer(storage=LazyTensorStorage(40, ndim=2))
    rb.extend(TensorDict(obs=torch.ones(4, 5), batch_size=[4, 5]))
    with pytest.raises(
        IndexError, match=r"time index \[9\] out of range; valid time indices are \[0, 5\)"
    ):
        rb[torch.tensor([[0, 9]])]
    assert rb[torch.tensor([[0, -1]])]["obs"].tolist() == [1.0]  # the last written step


# -- bad writes into an initialised storage ---------------------------------------------------
@pytest.mark.parametrize(
    ("data", "error", "match"),
    [
        (
            TensorDict(other=torch.ones(2, 3), batch_size=[2]),
            KeyError,
            "missing 'obs'; unexpected 'other'",
        ),
        (
            TensorDict(obs=torch.ones(2, 3), x=torch.ones(2), batch_size=[2]),
            KeyError,
            "unexpected 'x'",
        ),
        (
            TensorDict(obs=torch.ones(2, 4), batch_size=[2]),
            ValueError,
            r"per-item shape \(4,\).*expects \(3,\)",
        ),
        (
            TensorDict(obs=torch.ones(2, 3, dtype=torch.int64), batch_size=[2]),
            TypeError,
            "dtype torch.int64",
        ),
        (
            TensorDict(obs=torch.ones(2, 2, 3), batch_size=[2, 2]),
            ValueError,
            r"per-item shape \(2, 3\)",
        ),
    ],
)
def test_write_that_does_not_match_the_storage_raises_and_changes_nothing(
    data, error, match
) -> None:
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(TensorDict(obs=torch.zeros(5, 3), batch_size=[5]))
    with pytest.raises(error, match=match):
        rb.extend(data)
    assert len(rb) == 5 and rb[:]["obs"].abs().sum() == 0


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (TensorDict(obs=torch.ones(3, 5), batch_size=[3, 5]), "holds 4 envs, the data has 3"),
        (
            TensorDict(obs=torch.ones(5), batch_size=[5]),
            r"batch shape \[envs, N\]; got shape \(5,\)",
        ),
    ],
)
def test_2d_extend_with_mismatched_batch_dims_raises(data, match) -> None:
    rb = ReplayBuffer(storage=LazyTensorStorage(40, ndim=2))
    rb.extend(TensorDict(obs=torch.zeros(4, 5), batch_size=[4, 5]))
    with pytest.raises(ValueError, match=match):
        rb.extend(data)
    assert len(rb) == 20
