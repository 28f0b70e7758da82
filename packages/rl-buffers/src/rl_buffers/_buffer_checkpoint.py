"""Saving and restoring a buffer, mixed into :class:`~rl_buffers.ReplayBuffer`."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

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

    def dumps(self, path: str | Path) -> None:
        """Saves contents, write cursor and sampler state (priorities) into directory ``path``.

        Written to a temporary directory first and moved into place, so an
        interrupted dump never leaves a half-written checkpoint at ``path``.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        queued = prefetch_state.snapshot(self._futures, self._prefetch)  # waits, unlocked
        with self._lock:
            tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
            try:
                self._storage.dumps(tmp / "storage")
                rng = self._rng
                torch.save({"sampler": self._sampler.state_dict(), "writer": self._writer.state_dict(),
                            "kind": type(self).__name__, "storage": type(self._storage).__name__,
                            "rng": (rng.get_state(), str(rng.device)) if rng is not None else None,
                            "prefetch": queued},
                           tmp / "buffer.pt")  # fmt: skip
                old = None
                if path.exists():
                    old = path.with_name(f".{path.name}.old")
                    shutil.rmtree(old, ignore_errors=True)
                    path.rename(old)
                tmp.rename(path)
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise

    def loads(self, path: str | Path) -> None:
        """Restores a checkpoint written by :meth:`dumps` into this (same-shaped) buffer."""
        path = Path(path)
        if not (path / "buffer.pt").exists():
            raise FileNotFoundError(
                f"{str(path)!r} is not a replay-buffer checkpoint (no buffer.pt)."
            )
        state = torch.load(path / "buffer.pt", weights_only=False)
        if state["storage"] != type(self._storage).__name__:
            raise TypeError(
                f"the checkpoint holds a {state['storage']}, this buffer a {type(self._storage).__name__}: "
                "build the buffer with the same kind of storage."
            )
        prefetch_state.check(state.get("prefetch"), self._prefetch)
        prefetch_state.settle(self._futures)
        with self._lock:
            self._futures.clear()
            self._storage.loads(path / "storage")
            self._writer.load_state_dict(state["writer"])
            self._sampler.load_state_dict(state["sampler"])
            self._load_rng(state.get("rng"))
            self._futures = prefetch_state.restore(state.get("prefetch"))
