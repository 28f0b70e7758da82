"""Memory safety: refuse an allocation that cannot fit, before making it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch


class StorageMemoryError(MemoryError):
    """Raised before allocating a storage that the device or disk cannot hold."""


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.2f} GiB"


def available_bytes(device: torch.device) -> int | None:
    """Bytes that can still be allocated on ``device`` (RAM for CPU), or ``None`` if unknown."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(
    what: str, bytes_per_item: int, n_items: int, *, device: torch.device | None = None,
    directory: Path | None = None,
) -> None:  # fmt: skip
    """Raises :class:`StorageMemoryError` if ``bytes_per_item * n_items`` cannot be held.

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
        free = shutil.disk_usage(directory).free
        where = f"the disk of {directory}"
        fix = "choose a scratch_dir on a larger disk or lower max_size"
    else:
        assert device is not None
        free = available_bytes(device)
        where = f"{device}" + (" (available RAM)" if device.type == "cpu" else "")
        fix = "lower max_size, store fewer or smaller entries, or use LazyMemmapStorage"
    if free is not None and need > free:
        raise StorageMemoryError(
            f"{what} needs {_gib(need)} ({bytes_per_item} bytes per item x {n_items} items) "
            f"but only {_gib(free)} are free on {where}: {fix}. Nothing was allocated."
        )
