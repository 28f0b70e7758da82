"""``LazyMemmapStorage``: tensors backed by memory-mapped files that survive a restart."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from pathlib import Path

import torch

from rl_buffers import _memory
from rl_buffers._layout import Layout
from rl_buffers._memory import check_fits
from rl_buffers.storages.tensor_storage import TensorStorage

_META = "storage.json"
_STATE = "state.bin"


class LazyMemmapStorage(TensorStorage):
    """A storage whose leaves are memory-mapped files in ``scratch_dir``.

    Files are created on the first write (after checking the disk has room), with
    their disk blocks reserved (``posix_fallocate``): a full disk is a
    :class:`~rl_buffers.StorageMemoryError` then, never a ``SIGBUS`` when a later write
    touches a block that sparse files had only promised. On a filesystem that cannot
    reserve blocks the files are sparse, and their unwritten part counts as taken
    when later storages on the same filesystem check for room.
    ``storage.json`` records the layout and ``state.bin`` the length and write
    cursor (updated in place on every write), so a new process reopens the
    same directory with ``existsok=True`` and finds every item where it was.

    Args:
        max_size: the capacity in items.
        scratch_dir: the directory of the files. Default: a fresh temporary directory.
        auto_cleanup: remove ``scratch_dir`` when the storage is garbage-collected or the
            process exits (see :meth:`cleanup`). Default: ``True`` for the temporary
            directory, ``False`` for a ``scratch_dir`` you gave (it is kept for reopening).
        device: where sampled tensors are sent (the files live on the host).
        ndim: 1 (items) or 2 (``[envs, time]``).
        existsok: reopen ``scratch_dir`` if it already holds a storage.
        check_memory: check the disk has room before creating the files.
        compilable: TorchRL's flag, kept (see :attr:`Storage.compilable`).

    Raises:
        PermissionError: ``scratch_dir`` cannot be created or written.
        FileExistsError: ``scratch_dir`` holds a storage and ``existsok=False``.

    Examples:
        >>> import tempfile
        >>> from tensordict import TensorDict
        >>> d = tempfile.mkdtemp()
        >>> s = LazyMemmapStorage(10, scratch_dir=d)
        >>> s.set(slice(0, 3), TensorDict(x=torch.arange(3.0), batch_size=[3]))
        >>> len(LazyMemmapStorage(10, scratch_dir=d, existsok=True))
        3
    """

    _sparse_bytes = 0  # bytes of files whose blocks the filesystem could not reserve

    def __init__(
        self,
        max_size: int,
        *,
        scratch_dir: str | Path | None = None,
        device: torch.device | str = "cpu",
        ndim: int = 1,
        existsok: bool = False,
        check_memory: bool = True,
        compilable: bool = False,
        auto_cleanup: bool | None = None,
    ) -> None:
        super().__init__(
            max_size, device=device, ndim=ndim, check_memory=check_memory, compilable=compilable
        )
        self._scratch_dir_is_temp = scratch_dir is None
        self._auto_cleanup = self._scratch_dir_is_temp if auto_cleanup is None else auto_cleanup
        self._cleaned_up = False
        if scratch_dir is None:
            self.scratch_dir = Path(tempfile.mkdtemp(prefix="rl_buffers_memmap_"))
        else:
            self.scratch_dir = Path(scratch_dir)
            try:
                self.scratch_dir.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise PermissionError(
                    f"LazyMemmapStorage: cannot create scratch_dir {str(self.scratch_dir)!r} ({err.strerror}): "
                    "pass a directory you can write to."
                ) from err
        if not os.access(self.scratch_dir, os.W_OK | os.X_OK):
            raise PermissionError(
                f"LazyMemmapStorage: scratch_dir {str(self.scratch_dir)!r} is not writable: "
                "pass a directory you can write to (nothing was written)."
            )
        self._finalizer: weakref.finalize | None = None
        self._state: torch.Tensor | None = None
        if (self.scratch_dir / _META).exists():
            if not existsok:
                raise FileExistsError(
                    f"LazyMemmapStorage: {str(self.scratch_dir)!r} already holds a storage: pass "
                    "existsok=True to reopen it, or choose an empty directory."
                )
            self._reopen()
        if self._auto_cleanup:  # at garbage collection, or at the latest at interpreter exit
            self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.scratch_dir), True)

    def cleanup(self) -> bool:
        """Removes ``scratch_dir`` and its files now; the storage cannot be used afterwards.

        Returns:
            ``True`` if files were removed; ``False`` if the storage never wrote any, the
            directory is already gone, or it was cleaned up before.
        """
        if self._cleaned_up or self._layout is None:
            return False
        self._cleaned_up = True
        self._leaves, self._state, self._layout, self._filled = [], None, None, 0
        if self._finalizer is not None:
            self._finalizer.detach()
        if not self.scratch_dir.exists():
            return False
        shutil.rmtree(self.scratch_dir, ignore_errors=True)
        return True

    def _describe(self) -> str:
        return f"LazyMemmapStorage(max_size={self.max_size}, scratch_dir={str(self.scratch_dir)!r})"

    def _check_fits(self, bytes_per_item: int, n_items: int) -> None:
        check_fits(self._describe(), bytes_per_item, n_items, directory=self.scratch_dir)

    def _map(self, name: str, shape: torch.Size, dtype: torch.dtype, create: bool) -> torch.Tensor:
        path = self.scratch_dir / name
        nbytes = shape.numel() * torch.empty((), dtype=dtype).element_size()
        if create:
            if not _memory.reserve_file(path, nbytes):
                self._sparse_bytes += nbytes
        elif path.stat().st_size != nbytes:
            raise ValueError(
                f"LazyMemmapStorage: {path} has {path.stat().st_size} bytes, expected {nbytes}."
            )
        return torch.from_file(str(path), shared=True, size=shape.numel(), dtype=dtype).view(shape)

    def _allocate_leaf(self, i: int, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        return self._map(f"leaf{i}.memmap", shape, dtype, create=True)

    def _allocate_leaves(
        self, shapes: list[torch.Size], dtypes: list[torch.dtype]
    ) -> list[torch.Tensor]:
        self._sparse_bytes = 0
        try:
            leaves = [
                self._allocate_leaf(i, s, d)
                for i, (s, d) in enumerate(zip(shapes, dtypes, strict=True))
            ]
        except BaseException:  # a full disk half way: remove the files already made
            for i in range(len(shapes)):
                (self.scratch_dir / f"leaf{i}.memmap").unlink(missing_ok=True)
            raise
        if self._sparse_bytes:  # blocks not reserved: count the unwritten part as taken
            _memory.reserve(self, _memory.disk_pool(self.scratch_dir), self._sparse_bytes,
                            _memory.written_fraction)  # fmt: skip
        return leaves

    def _initialize(self, data) -> None:
        super()._initialize(data)
        self._state = self._map(_STATE, torch.Size([3]), torch.int64, create=True)
        meta = {
            "max_size": self.max_size, "ndim": self.ndim, "envs": self._envs,
            "layout": self._layout.to_meta(), "shapes": [list(b.shape) for b in self._leaves],
        }  # fmt: skip
        if self._layout.kind == "pytree":
            torch.save(self._layout.treespec, self.scratch_dir / "treespec.pt")
        tmp = self.scratch_dir / (_META + ".tmp")
        tmp.write_text(json.dumps(meta))
        tmp.replace(self.scratch_dir / _META)

    def _reopen(self) -> None:
        meta = json.loads((self.scratch_dir / _META).read_text())
        if meta["max_size"] != self.max_size or meta["ndim"] != self.ndim:
            raise ValueError(
                f"{str(self.scratch_dir)!r} holds a storage of max_size={meta['max_size']}, ndim={meta['ndim']}; "
                f"reopen it with the same values (got max_size={self.max_size}, ndim={self.ndim})."
            )
        treespec = None
        if meta["layout"]["kind"] == "pytree":
            treespec = torch.load(self.scratch_dir / "treespec.pt", weights_only=False)
        self._layout = Layout.from_meta(meta["layout"], treespec)
        self._leaves = [self._map(f"leaf{i}.memmap", torch.Size(s), d, create=False)
                        for i, (s, d) in enumerate(zip(meta["shapes"], self._layout.dtypes, strict=False))]  # fmt: skip
        self._envs = meta["envs"]
        self._state = self._map(_STATE, torch.Size([3]), torch.int64, create=False)
        self._filled, self._cursor, self._write_count = (int(v) for v in self._state.tolist())

    def _after_write(self) -> None:
        if self._state is not None:
            self._state[0], self._state[1], self._state[2] = (
                self._filled,
                self._cursor,
                self._write_count,
            )
