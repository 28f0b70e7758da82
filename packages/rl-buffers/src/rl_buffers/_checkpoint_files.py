"""The files of a buffer checkpoint: integrity manifest, full-disk errors, orphan cleanup.

A checkpoint directory written by ``rb.dumps(path)`` ends with ``manifest.json``:
the size and SHA-256 of every other file in it. ``rb.loads(path)`` checks them
before reading anything, so a truncated or corrupted file is an error that names
it, never a buffer silently loaded with wrong values.

``dumps`` writes into a hidden sibling ``.<name>.partial-<host>-<pid>-<random>``
and renames it into place. A process killed mid-dump (``SIGKILL``, OOM killer)
leaves that directory behind; the next successful dump beside it removes the
partial directories of the same checkpoint name whose writer is gone: same host
and the pid is not running, or (another host sharing the filesystem, where a pid
means nothing) untouched for :data:`STALE_AFTER_S` seconds. Nothing else is
touched: only names this module makes, next to the checkpoint being written.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import socket
import time
from pathlib import Path

from rl_buffers._memory import disk_free, no_space_message

MANIFEST = "manifest.json"
_VERSION = 1
STALE_AFTER_S = 24 * 3600
_CHUNK = 1 << 20


class CheckpointCorruptError(RuntimeError):
    """A checkpoint file is missing, truncated or does not match its recorded checksum."""


class NoSpaceError(OSError):
    """The disk filled up while writing a checkpoint (``errno.ENOSPC``); nothing was kept."""

    def __init__(self, path: Path | str, needed: int, free: int | None, fix: str) -> None:
        super().__init__(errno.ENOSPC, f"{no_space_message(path, needed, free)}: {fix}")


# -- integrity ---------------------------------------------------------------------
def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)


def write_manifest(root: Path) -> None:
    """Records the size and SHA-256 of every file under ``root`` in ``root/manifest.json``."""
    files = {
        p.relative_to(root).as_posix(): {"size": p.stat().st_size, "sha256": _digest(p)}
        for p in _files(root)
    }
    data = json.dumps({"version": _VERSION, "files": files}, indent=1)
    with open(root / MANIFEST, "w") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def verify_manifest(root: Path) -> bool:
    """Checks every file ``root/manifest.json`` lists; ``False`` if there is no manifest.

    Raises:
        CheckpointCorruptError: a listed file is missing, has another size, or another
            SHA-256; or the manifest itself is unreadable.
    """
    manifest = root / MANIFEST
    if not manifest.exists():
        return False
    try:
        files = json.loads(manifest.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CheckpointCorruptError(
            f"checkpoint {str(root)!r}: its {MANIFEST} is unreadable ({err}); the checkpoint "
            "cannot be verified: restore it from a good copy or write a new one with dumps()."
        ) from err
    for rel, want in files.items():
        path = root / rel
        if not path.is_file():
            raise CheckpointCorruptError(
                f"checkpoint {str(root)!r}: file {rel!r} is missing (the manifest lists it): "
                "restore the directory from a good copy or write a new one with dumps()."
            )
        size = path.stat().st_size
        if size != want["size"]:
            raise CheckpointCorruptError(
                f"checkpoint file {str(path)!r} has {size} bytes, the manifest records "
                f"{want['size']} (truncated or overwritten): restore it from a good copy or "
                "write a new checkpoint with dumps()."
            )
        if _digest(path) != want["sha256"]:
            raise CheckpointCorruptError(
                f"checkpoint file {str(path)!r} does not match its SHA-256 checksum (expected "
                f"{want['sha256'][:16]}..., the bytes on disk differ: the file is corrupted): "
                "restore it from a good copy or write a new checkpoint with dumps()."
            )
    return True


# -- partial directories -------------------------------------------------------------
def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:40] or "host"


def partial_prefix(path: Path) -> str:
    """The name prefix of this process's temporary directories for checkpoint ``path``."""
    return f".{path.name}.partial-{_host()}-{os.getpid()}-"


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"^\.{re.escape(name)}\.partial-(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)-[^/]+$")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


def remove_orphans(path: Path, keep: Path | None = None) -> list[Path]:
    """Removes the partial directories of checkpoint ``path`` left by dead writers.

    Args:
        path: the checkpoint directory (its siblings are scanned).
        keep: a directory never to remove (the one being written).

    Returns:
        The directories removed.
    """
    pattern, host, now, removed = _pattern(path.name), _host(), time.time(), []
    try:
        siblings = list(path.parent.iterdir())
    except OSError:
        return removed
    for entry in siblings:
        match = pattern.match(entry.name)
        if match is None or entry == keep or not entry.is_dir():
            continue
        try:
            age = now - entry.stat().st_mtime
        except OSError:
            continue
        # on another machine sharing the filesystem a pid says nothing: go by age there
        same_host = match["host"] == host
        dead = not _pid_alive(int(match["pid"])) if same_host else age > STALE_AFTER_S
        if dead:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


# -- full disk ---------------------------------------------------------------------
_NO_SPACE_TEXT = ("no space left", "unexpected pos", "file write failed", "enospc")


def is_no_space(err: BaseException) -> bool:
    """Whether ``err`` (an OSError, or torch's RuntimeError from its zip writer) is a full disk."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(err, RuntimeError) and any(t in str(err).lower() for t in _NO_SPACE_TEXT):
            return True
        err = err.__cause__ or err.__context__
    return False


def check_room(directory: Path, needed: int) -> None:
    """Raises :class:`NoSpaceError` before writing if ``needed`` bytes cannot fit."""
    free = disk_free(directory)
    if needed > free:
        raise NoSpaceError(
            directory, needed, free, "free some space or dump to another disk. Nothing was written."
        )
