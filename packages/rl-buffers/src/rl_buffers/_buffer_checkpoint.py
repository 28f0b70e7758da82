"""Saving and restoring a buffer, mixed into :class:`~rl_buffers.ReplayBuffer`."""

from __future__ import annotations

import pickle
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from rl_buffers import _checkpoint_files as files
from rl_buffers import _prefetch_state as prefetch_state


class Checkpointing:
    """``state_dict`` / ``load_state_dict`` (in memory) and ``dumps`` / ``loads`` (a directory).

    Both keep the contents, the write cursor and count, the sampler's state
    (priorities) and the generator's state, so a restored buffer samples what the
    original would have.

    Examples:
        >>> import torch
        >>> from rl_buffers import LazyTensorStorage, ReplayBuffer
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(10), generator=torch.Generator().manual_seed(0))
        >>> _ = rb.extend(torch.arange(10))
        >>> state = rb.state_dict()
        >>> first = rb.sample(4)
        >>> rb.load_state_dict(state)
        >>> bool((rb.sample(4) == first).all())
        True
    """

    def state_dict(self) -> dict[str, Any]:
        """Contents, write cursor, sampler state, generator state and the prefetched
        batches, as a dict (TorchRL's keys)."""
        queued = prefetch_state.snapshot(self._futures, self._prefetch)  # waits, unlocked
        with self._lock:
            rng = self._rng
            return {
                "_storage": self._storage.state_dict(),
                "_sampler": self._sampler.state_dict(),
                "_writer": self._writer.state_dict(),
                "_batch_size": self._batch_size,
                "_rng": (rng.get_state().clone(), str(rng.device)) if rng is not None else None,
                "_prefetch_state": queued,
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned, into a buffer built the same way."""
        queued = state.get("_prefetch_state")
        prefetch_state.check(queued, self._prefetch)
        prefetch_state.settle(self._futures)
        with self._lock:
            self._futures.clear()
            self._storage.load_state_dict(state["_storage"])
            self._sampler.load_state_dict(state["_sampler"])
            self._writer.load_state_dict(state["_writer"])
            self._batch_size = state["_batch_size"]
            self._load_rng(state.get("_rng"))
            self._futures = prefetch_state.restore(queued)

    def _load_rng(self, rng_state: tuple[torch.Tensor, str] | None) -> None:
        if rng_state is None:
            return
        if self._rng is None:
            self.set_rng(torch.Generator(device=rng_state[1]))
        self._rng.set_state(rng_state[0])

    def _dump_bytes(self) -> int:
        """A lower bound of a dump's size: the written part of the storage's tensors."""
        storage = self._storage
        nbytes = getattr(storage, "nbytes", None)
        if nbytes is None or not getattr(storage, "_leaves", None):
            return 0
        capacity = storage._leaves[0].shape[storage.ndim - 1]
        return int(nbytes() * min(1.0, storage._filled / max(1, capacity)))

    def dumps(self, path: str | Path) -> None:
        """Saves contents, write cursor and sampler state (priorities) into directory ``path``.

        Written to a hidden temporary directory beside ``path`` first, checksummed
        (``manifest.json``, checked by :meth:`loads`) and moved into place, so an
        interrupted dump never leaves a half-written checkpoint at ``path``. The
        temporary directories of dumps killed before they finished are removed by
        the next successful one (see :mod:`rl_buffers._checkpoint_files`).

        Raises:
            NoSpaceError: the disk cannot hold the checkpoint (checked before writing
                where the size is known, else when the write fails); nothing is left
                behind and a previous checkpoint at ``path`` is kept.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        queued = prefetch_state.snapshot(self._futures, self._prefetch)  # waits, unlocked
        with self._lock:
            needed = self._dump_bytes()
            files.check_room(path.parent, needed)
            tmp = Path(tempfile.mkdtemp(prefix=files.partial_prefix(path), dir=path.parent))
            try:
                self._storage.dumps(tmp / "storage")
                rng = self._rng
                size = {"max_size": getattr(self._storage, "max_size", None),
                        "ndim": getattr(self._storage, "ndim", 1)}  # fmt: skip
                torch.save({"sampler": self._sampler.state_dict(), "writer": self._writer.state_dict(),
                            "kind": type(self).__name__, "storage": type(self._storage).__name__,
                            "storage_size": size,
                            "rng": (rng.get_state(), str(rng.device)) if rng is not None else None,
                            "prefetch": queued},
                           tmp / "buffer.pt")  # fmt: skip
                files.write_manifest(tmp)
                old = None
                if path.exists():
                    old = path.with_name(f".{path.name}.old")
                    shutil.rmtree(old, ignore_errors=True)
                    path.rename(old)
                tmp.rename(path)
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
            except BaseException as err:
                shutil.rmtree(tmp, ignore_errors=True)
                if isinstance(err, Exception) and files.is_no_space(err):
                    raise files.NoSpaceError(
                        path.parent, needed, files.disk_free(path.parent),
                        f"free some space or dump to another disk. Nothing was kept "
                        f"({'the previous checkpoint is unchanged' if path.exists() else 'no checkpoint was written'}).",
                    ) from err  # fmt: skip
                raise
        files.remove_orphans(path)

    def loads(self, path: str | Path) -> None:
        """Restores a checkpoint written by :meth:`dumps` into this (same-shaped) buffer.

        Every file is checked against the checkpoint's ``manifest.json`` first.

        Raises:
            FileNotFoundError: ``path`` is not a buffer checkpoint.
            CheckpointCorruptError: a file is missing, truncated or fails its checksum
                (nothing was loaded).
            ValueError / TypeError: the checkpoint was written by a buffer of another
                capacity or kind of storage (nothing was loaded).
        """
        path = Path(path)
        if not (path / "buffer.pt").exists():
            raise FileNotFoundError(
                f"{str(path)!r} is not a replay-buffer checkpoint (no buffer.pt)."
            )
        if not files.verify_manifest(path):
            warnings.warn(
                f"checkpoint {str(path)!r} has no {files.MANIFEST} (written before checksums, or "
                "the file was removed): its files cannot be verified. Write it again with dumps().",
                stacklevel=2,
            )
        state = _read(path / "buffer.pt")
        if state["storage"] != type(self._storage).__name__:
            raise TypeError(
                f"the checkpoint holds a {state['storage']}, this buffer a {type(self._storage).__name__}: "
                "build the buffer with the same kind of storage."
            )
        size = state.get("storage_size")
        mine = (getattr(self._storage, "max_size", None), getattr(self._storage, "ndim", 1))
        if size is not None and (size["max_size"], size["ndim"]) != mine:
            raise ValueError(
                f"checkpoint {str(path)!r} holds a storage of max_size={size['max_size']}, "
                f"ndim={size['ndim']}; this buffer's has max_size={mine[0]}, ndim={mine[1]}: build "
                "the buffer with the same capacity to load it. Nothing was loaded."
            )
        prefetch_state.check(state.get("prefetch"), self._prefetch)
        prefetch_state.settle(self._futures)
        with self._lock:
            self._futures.clear()
            # the sampler first: a priority tree of another capacity refuses before any change
            self._sampler.load_state_dict(state["sampler"])
            try:
                self._storage.loads(path / "storage")
            except (RuntimeError, EOFError, pickle.UnpicklingError) as err:
                if isinstance(err, files.CheckpointCorruptError) or not _unreadable(err):
                    raise
                raise files.CheckpointCorruptError(
                    f"checkpoint {str(path)!r}: the storage files under {str(path / 'storage')!r} "
                    f"cannot be read ({type(err).__name__}: {str(err)[:200]}): they are truncated "
                    "or corrupted; restore them from a good copy or write a new checkpoint."
                ) from err
            self._writer.load_state_dict(state["writer"])
            self._load_rng(state.get("rng"))
            self._futures = prefetch_state.restore(state.get("prefetch"))


def _unreadable(err: BaseException) -> bool:
    text = str(err)
    return isinstance(err, EOFError | pickle.UnpicklingError) or any(
        t in text
        for t in ("PytorchStreamReader", "failed finding central directory", "invalid header")
    )


def _read(path: Path) -> Any:
    """``torch.load`` with truncated / corrupted files reported as such, naming the file."""
    try:
        return torch.load(path, weights_only=False)
    except (RuntimeError, EOFError, pickle.UnpicklingError) as err:
        if not _unreadable(err):
            raise
        raise files.CheckpointCorruptError(
            f"checkpoint file {str(path)!r} cannot be read ({type(err).__name__}: {str(err)[:200]}): "
            "it is truncated or corrupted; restore it from a good copy or write a new checkpoint."
        ) from err
