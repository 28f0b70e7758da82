"""Memory safety: refuse an allocation that cannot fit, before making it.

Admission compares what a storage needs with what is really left: the smaller of
``MemAvailable`` and the room under the process's cgroup memory limit (v2
``memory.max`` or v1 ``memory.limit_in_bytes``), minus what the live storages of
this process have reserved but not touched yet. ``torch.empty`` and sparse files
take no page until written, so without that last term three 14 GiB buffers would
each see 20 GiB "available" and the third would be killed mid-training.

Reservations are held by the storage object and released when it is garbage
collected (a ``weakref.finalize``), so a dropped buffer gives its room back.
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import threading
import weakref
from collections.abc import Callable
from pathlib import Path

import torch


class StorageMemoryError(MemoryError):
    """Raised before allocating a storage that the device or disk cannot hold."""


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.2f} GiB"


def _size(nbytes: int) -> str:
    """A byte count as a person reads it (``'40.0 MiB (41943040 bytes)'``)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit} ({nbytes} bytes)"
    return f"{nbytes} bytes"


def no_space_message(path: Path | str, needed: int, free: int | None) -> str:
    """The one wording of a full disk: ``no space left on <path>: needed X, free Y``."""
    free_s = "unknown" if free is None else _size(free)
    return f"no space left on {path}: needed {_size(needed)}, free {free_s}"


# -- live reservations --------------------------------------------------------------
_lock = threading.Lock()
_ids = itertools.count()
# token -> (pool, bytes, weak owner, fraction of the bytes already resident)
_live: dict[int, tuple[str, int, weakref.ref, Callable[[object], float]]] = {}


def ram_pool() -> str:
    return "ram"


def disk_pool(directory: Path | str) -> str:
    """The pool of a filesystem: reservations on the same device add up."""
    return f"disk:{os.stat(directory).st_dev}"


def reserve(owner: object, pool: str, nbytes: int, resident: Callable[[object], float]) -> int:
    """Records that ``owner`` holds ``nbytes`` in ``pool`` until it is garbage collected.

    Args:
        owner: the storage; the reservation ends with it (or at :func:`release`).
        pool: :func:`ram_pool` or :func:`disk_pool`.
        nbytes: the bytes allocated.
        resident: ``resident(owner)`` is the fraction in ``[0, 1]`` already backed by
            real pages / blocks (those are already out of ``MemAvailable`` / disk free,
            so not counted twice). It gets the owner, so it must not hold it itself.

    Returns:
        A token for :func:`release`.
    """
    token = next(_ids)
    with _lock:
        _live[token] = (pool, int(nbytes), weakref.ref(owner), resident)
    weakref.finalize(owner, release, token)
    return token


def release(token: int | None) -> None:
    """Ends a reservation now (idempotent)."""
    if token is None:
        return
    with _lock:
        _live.pop(token, None)


def written_fraction(storage: object) -> float:
    """The part of a tensor storage's capacity that holds written items (those pages are real)."""
    leaves = getattr(storage, "_leaves", None)
    if not leaves:
        return 1.0  # cleaned up / nothing allocated: nothing outstanding
    return storage._filled / max(1, leaves[0].shape[storage.ndim - 1])


def outstanding_bytes(pool: str) -> int:
    """Bytes reserved in ``pool`` by live owners and not yet backed by real pages."""
    with _lock:
        entries = list(_live.values())
    total = 0
    for entry_pool, nbytes, ref, resident in entries:
        owner = ref()
        if entry_pool != pool or owner is None:
            continue
        try:
            frac = min(max(float(resident(owner)), 0.0), 1.0)
        except Exception:  # an owner half torn down counts in full: never under-count
            frac = 0.0
        total += int(nbytes * (1.0 - frac))
    return total


# -- what is free -------------------------------------------------------------------
def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _stat_field(path: Path, names: tuple[str, ...]) -> int:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key in names:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _ancestors(root: Path, rel: str) -> list[Path]:
    """``root/rel`` and each parent up to ``root`` that exists (a limit may sit higher)."""
    parts = [p for p in rel.strip("/").split("/") if p]
    dirs = [root.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]
    return [d for d in dirs if d.is_dir()]


def cgroup_room(
    proc_cgroup: Path | str = "/proc/self/cgroup", root: Path | str = "/sys/fs/cgroup"
) -> int | None:
    """Bytes this process may still use under its cgroup memory limits, ``None`` if unlimited.

    Reads the process's cgroup from ``proc_cgroup``: for cgroup v2 (``0::<path>``)
    ``memory.max`` minus ``memory.current``, for v1 (the ``memory`` controller's
    line) ``memory.limit_in_bytes`` minus ``memory.usage_in_bytes``, at that cgroup
    and every ancestor; reclaimable page cache (``inactive_file``) counts as room.
    The smallest room wins.

    Args:
        proc_cgroup: the ``/proc/<pid>/cgroup`` file to read.
        root: where the cgroup hierarchies are mounted.

    Examples:
        >>> room = cgroup_room()
        >>> room is None or room >= 0
        True
    """
    root = Path(root)
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    rooms: list[int] = []
    for line in lines:
        hier, _, rest = line.partition(":")
        controllers, _, rel = rest.partition(":")
        if hier == "0" and controllers == "":
            candidates = [(d, "memory.max", "memory.current", ("inactive_file",))
                          for d in _ancestors(root, rel)]  # fmt: skip
            if not candidates:  # hybrid hosts mount v2 under unified/
                candidates = [(d, "memory.max", "memory.current", ("inactive_file",))
                              for d in _ancestors(root / "unified", rel)]  # fmt: skip
        elif "memory" in controllers.split(","):
            candidates = [(d, "memory.limit_in_bytes", "memory.usage_in_bytes",
                           ("total_inactive_file", "inactive_file"))
                          for d in _ancestors(root / "memory", rel)]  # fmt: skip
        else:
            continue
        for directory, limit_name, usage_name, cache_names in candidates:
            limit = _read_int(directory / limit_name)
            if limit is None or limit >= 2**62:  # "max", or v1's "no limit" (~2**63)
                continue
            usage = _read_int(directory / usage_name) or 0
            cache = _stat_field(directory / "memory.stat", cache_names)
            rooms.append(max(0, limit - max(0, usage - cache)))
    return min(rooms) if rooms else None


def _mem_available(meminfo: Path | str = "/proc/meminfo") -> int | None:
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def available_bytes(device: torch.device) -> int | None:
    """Bytes that can still be allocated on ``device``, or ``None`` if unknown.

    For the CPU: the smaller of ``MemAvailable`` and the cgroup room
    (:func:`cgroup_room`), before subtracting live reservations.
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type != "cpu":
        return None
    known = [v for v in (_mem_available(), cgroup_room()) if v is not None]
    return min(known) if known else None


def disk_free(directory: Path | str) -> int:
    """Free bytes on the filesystem of ``directory`` (for an unprivileged writer)."""
    return shutil.disk_usage(directory).free


def check_fits(
    what: str, bytes_per_item: int, n_items: int, *, device: torch.device | None = None,
    directory: Path | None = None,
) -> None:  # fmt: skip
    """Raises :class:`StorageMemoryError` if ``bytes_per_item * n_items`` cannot be held.

    Live reservations of other storages in this process on the same pool (RAM, or
    the same filesystem) that are not yet backed by pages count as taken.

    Args:
        what: the storage, for the message (e.g. ``"LazyTensorStorage(max_size=1000000)"``).
        bytes_per_item: the bytes of one stored element.
        n_items: the number of elements to allocate.
        device: the device that holds the tensors (RAM / GPU memory is checked).
        directory: for memory-mapped storages, the directory whose disk is checked.

    Examples:
        >>> check_fits("demo", 4, 10, device=torch.device("cpu"))
    """
    need = bytes_per_item * n_items
    if directory is not None:
        free: int | None = disk_free(directory)
        reserved = outstanding_bytes(disk_pool(directory))
        where = f"the disk of {directory}"
        fix = "choose a scratch_dir on a larger disk or lower max_size"
    else:
        assert device is not None
        free = available_bytes(device)
        reserved = outstanding_bytes(ram_pool()) if device.type == "cpu" else 0
        where = f"{device}" + (
            " (available RAM, cgroup limit included)" if device.type == "cpu" else ""
        )
        fix = "lower max_size, store fewer or smaller entries, or use LazyMemmapStorage"
    if free is None:
        return
    left = max(0, free - reserved)
    if need > left and directory is not None:
        held = f" after {_size(reserved)} reserved by live sparse storages" if reserved else ""
        raise StorageMemoryError(
            f"{what}: {no_space_message(directory, need, left)}{held} "
            f"({bytes_per_item} bytes per item x {n_items} items): {fix}. Nothing was allocated."
        )
    if need > left:
        held = (
            f" ({_gib(reserved)} of the {_gib(free)} free are reserved by live storages of this "
            "process that have not been filled yet)"
            if reserved
            else ""
        )
        raise StorageMemoryError(
            f"{what} needs {_gib(need)} ({bytes_per_item} bytes per item x {n_items} items) "
            f"but only {_gib(left)} are free on {where}{held}: {fix}. Nothing was allocated."
        )


def reserve_file(path: Path, nbytes: int) -> bool:
    """Creates ``path`` with ``nbytes`` of disk blocks really allocated (not a sparse file).

    A sparse file takes its blocks on first write; on a full disk that write is a
    ``SIGBUS`` that kills the process. ``posix_fallocate`` takes them now, so a full
    disk is an error here instead.

    Returns:
        ``True`` if the blocks were reserved; ``False`` if the filesystem cannot
        (the file is then sparse and the caller counts it as a live reservation).

    Raises:
        StorageMemoryError: the disk has no room (the file is removed).
    """
    fallocate = getattr(os, "posix_fallocate", None)  # absent on macOS
    with open(path, "wb") as f:
        if nbytes == 0:
            return True
        try:
            if fallocate is None:
                raise OSError(errno.ENOSYS, "posix_fallocate is not available")
            fallocate(f.fileno(), 0, nbytes)
            return True
        except OSError as err:
            if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                f.close()
                path.unlink(missing_ok=True)
                raise StorageMemoryError(
                    no_space_message(path.parent, nbytes, disk_free(path.parent))
                    + ": free some space, choose a scratch_dir on a larger disk or lower "
                    "max_size. Nothing was kept."
                ) from err
            if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
        f.truncate(nbytes)
        return False
