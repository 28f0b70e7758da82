"""Storages of preallocated tensors, one per leaf: ``TensorStorage`` and ``LazyTensorStorage``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree
from tensordict import is_tensor_collection

from rl_buffers import _memory
from rl_buffers._layout import Layout, NestedKey, as_tuple
from rl_buffers._memory import check_fits
from rl_buffers.storages._compact import CompactNext
from rl_buffers.storages.base import Storage


def _as_index(index: Any) -> slice | torch.Tensor:
    """A write / read index as a slice (contiguous ranges) or a tensor of positions."""
    if isinstance(index, slice | torch.Tensor):
        return index
    if isinstance(index, range) and index.step == 1:
        return slice(index.start, max(index.start, index.stop))
    return torch.as_tensor(list(index) if isinstance(index, range) else index, dtype=torch.long)


class TensorStorage(Storage):
    """Items kept in one preallocated tensor per leaf, allocated on the first write.

    With ``ndim=1`` each leaf has shape ``[max_size, *item]``. With ``ndim=2``
    the storage is ``[envs, max_size // envs]`` (``envs`` read from the first
    write, data ``[envs, T]``) and writes go along time: each env keeps its own
    time line, and sampled ``index`` entries are ``(env, time)`` pairs.

    Args:
        max_size: the capacity in items (all envs together when ``ndim=2``); or, as
            TorchRL's ``TensorStorage(storage)``, a preallocated tensor / TensorDict
            whose leading dim(s) give the capacity and whose leaves are written in
            place (an empty ``TensorDict(batch_size=[n])`` gets its leaves on the first
            write).
        device: where the tensors live and samples are returned (default: the
            preallocated storage's device, else CPU).
        ndim: 1 or 2, the number of leading dims that index items.
        compact_keys: observation keys stored once; ``("next", key)`` is then
            derived at sample time (1-d storages of TensorDicts only; see
            :mod:`rl_buffers.storages._compact`).
        check_memory: compute the bytes to allocate first and raise
            :class:`~rl_buffers.StorageMemoryError` if they cannot fit.
        compilable: TorchRL's flag, kept (see :attr:`Storage.compilable`).
    """

    def __init__(
        self,
        max_size: int | Any,
        *,
        device: torch.device | str | None = None,
        ndim: int = 1,
        compact_keys: Sequence[NestedKey] | None = None,
        check_memory: bool = True,
        compilable: bool = False,
    ) -> None:
        self._compilable = bool(compilable)
        preallocated = None
        if isinstance(max_size, torch.Tensor) or is_tensor_collection(max_size):
            preallocated = max_size
            max_size = int(torch.Size(preallocated.shape[:ndim]).numel())
            if device is None and preallocated.device is not None:
                device = preallocated.device
        device = "cpu" if device is None else device
        if int(max_size) < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size}.")
        if ndim not in (1, 2):
            raise ValueError(f"ndim must be 1 or 2, got {ndim}.")
        if compact_keys and ndim != 1:
            raise ValueError(
                "compact_keys needs a 1-d storage (ndim=1): flatten [envs, time] batches first."
            )
        self.max_size = int(max_size)
        self.ndim = ndim
        self.device = torch.device(device)
        self.check_memory = check_memory
        self.compact_keys = [as_tuple(k) for k in (compact_keys or ())]
        self._next_keys = [("next", *k) for k in self.compact_keys]
        self._layout: Layout | None = None
        self._leaves: list[torch.Tensor] = []
        self._envs = 1
        self._filled = 0
        self._cursor = 0
        self._write_count = 0
        self._compact: CompactNext | None = None
        self._compact_pos: list[int] = []
        if preallocated is not None and not (
            is_tensor_collection(preallocated) and preallocated.is_empty()
        ):
            self._adopt(preallocated)

    def _adopt(self, storage: Any) -> None:
        """Uses the leaves of a preallocated ``[max_size, ...]`` (or ``[envs, T, ...]``) storage."""
        self._layout = Layout.infer(storage, self.ndim)
        self._leaves = self._layout.leaves(storage, self.ndim)
        self._envs = 1 if self.ndim == 1 else storage.shape[0]

    # -- shape bookkeeping ---------------------------------------------------------
    def __len__(self) -> int:
        return self._filled * self._envs

    @property
    def shape(self) -> torch.Size:
        """``[len]`` or ``[envs, filled time steps]``."""
        return (
            torch.Size([self._filled]) if self.ndim == 1 else torch.Size([self._envs, self._filled])
        )

    @property
    def layout(self) -> Layout | None:
        return self._layout

    @property
    def _storage(self) -> Any:
        """TorchRL's name for the stored data as one structure over the whole capacity
        (``[max_size]`` or ``[envs, steps]``; items past ``len()`` are unwritten), sharing
        memory with the storage; ``None`` before the first write. Scripts ported from TorchRL
        read ``storage._storage[index]``; :meth:`get` is this package's way."""
        if self._layout is None:
            return None
        batch = self._leaves[0].shape[: self.ndim] if self._leaves else torch.Size([self.max_size])
        return self._layout.build(list(self._leaves), batch, device=self.device)

    def _time_capacity(self, envs: int) -> int:
        if self.ndim == 1:
            return self.max_size
        if self.max_size < envs:
            raise ValueError(
                f"max_size={self.max_size} is smaller than the {envs} envs of the data."
            )
        return self.max_size // envs

    def n_items(self, data: Any) -> int:
        return self._batch_shape(data)[self.ndim - 1]

    def write_capacity(self, data: Any) -> int:
        return self._time_capacity(
            self._envs if self._layout is not None else self._batch_shape(data)[0]
        )

    def take(self, data: Any, start: int) -> Any:
        index = slice(start, None) if self.ndim == 1 else (slice(None), slice(start, None))
        if is_tensor_collection(data) or isinstance(data, torch.Tensor):
            return data[index]
        return pytree.tree_map(lambda x: x[index], data)

    def _batch_shape(self, data: Any) -> torch.Size:
        if is_tensor_collection(data) or isinstance(data, torch.Tensor):
            shape = data.shape
        else:
            leaves = pytree.tree_leaves(data)
            shape = (
                leaves[0].shape if leaves and isinstance(leaves[0], torch.Tensor) else torch.Size()
            )
        if len(shape) < self.ndim:
            raise ValueError(
                f"a {self.ndim}-d storage is extended with data of batch shape [{'envs, ' if self.ndim == 2 else ''}N]; "
                f"got shape {tuple(shape)}."
            )
        return shape[: self.ndim]

    def checked_coords(self, index: torch.Tensor) -> torch.Tensor:
        """``[..., 2]`` ``(env, time)`` pairs checked against the filled range of a 2-d storage,
        negative entries counted from the end (``-1``: the last env / the last written step).

        :meth:`get` reads whatever it is given (samplers only produce valid pairs); user
        indexing (``rb[pairs]``) goes through this first, so an unwritten slot is never read.

        Raises:
            IndexError: not ``[..., 2]`` integer pairs, or a pair outside ``[0, envs) x [0, filled)``.
        """
        if index.dtype.is_floating_point or index.dtype.is_complex or index.dtype == torch.bool:
            raise IndexError(
                f"{type(self).__name__}(ndim=2) is indexed by integer (env, time) pairs; got a "
                f"{index.dtype} tensor: pass a long tensor of shape [n, 2]."
            )
        if index.ndim == 0 or index.shape[-1] != 2:
            raise IndexError(
                f"{type(self).__name__}(ndim=2) is indexed by (env, time) pairs of shape [..., 2]; "
                f"got shape {tuple(index.shape)}: stack the env and time indices on the last dim."
            )
        index = index.long()
        for dim, (name, size) in enumerate((("env", self._envs), ("time", self._filled))):
            col = index[..., dim]
            if col.numel() and (int(col.min()) < -size or int(col.max()) >= size):
                bad = col[(col < -size) | (col >= size)]
                raise IndexError(
                    f"{type(self).__name__} of shape {tuple(self.shape)}: {name} index "
                    f"{bad.tolist()[:5]} out of range; valid {name} indices are [0, {size}) "
                    f"(or [-{size}, -1] from the end). Only written steps can be read."
                )
        return torch.where(
            index < 0, index + torch.tensor([self._envs, self._filled], device=index.device), index
        )

    def unravel(self, flat: torch.Tensor) -> torch.Tensor:
        if self.ndim == 1:
            return flat
        return torch.stack([flat // self._filled, flat % self._filled], dim=-1)

    def flat_position(self, index: torch.Tensor) -> torch.Tensor:
        """Storage index -> position in ``[0, max_size)`` (``env * time_capacity + t`` for 2-d)."""
        if self.ndim == 1:
            return index
        return index[..., 0] * self._leaves[0].shape[1] + index[..., 1]

    # -- allocation ------------------------------------------------------------------
    def _describe(self) -> str:
        return f"{type(self).__name__}(max_size={self.max_size})"

    def _allocate_leaf(self, i: int, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device=self.device)

    def _check_fits(self, bytes_per_item: int, n_items: int) -> None:
        check_fits(self._describe(), bytes_per_item, n_items, device=self.device)

    def _allocate_leaves(
        self, shapes: list[torch.Size], dtypes: list[torch.dtype]
    ) -> list[torch.Tensor]:
        leaves = [
            self._allocate_leaf(i, s, d)
            for i, (s, d) in enumerate(zip(shapes, dtypes, strict=True))
        ]
        if self.device.type == "cpu":  # pages come on first write: count the rest as taken
            nbytes = sum(b.numel() * b.element_size() for b in leaves)
            _memory.reserve(self, _memory.ram_pool(), nbytes, _memory.written_fraction)
        return leaves

    def _initialize(self, data: Any) -> None:
        layout = Layout.infer(data, self.ndim, ignore=self._ignored())
        if self.compact_keys:
            if layout.kind != "tensordict":
                raise TypeError("compact_keys needs TensorDict data.")
            for k, nk in zip(self.compact_keys, self._next_keys, strict=False):
                if k not in layout.keys or nk not in layout.keys:
                    raise KeyError(f"compact_keys: the data must hold both {k!r} and {nk!r}.")
            self._compact_pos = [layout.keys.index(k) for k in self.compact_keys]
            full = layout
            keep = [i for i, k in enumerate(full.keys) if k not in self._next_keys]
            layout = Layout("tensordict", [full.keys[i] for i in keep], [full.shapes[i] for i in keep],
                            [full.dtypes[i] for i in keep], item_batch=full.item_batch)  # fmt: skip
            self._compact_pos = [layout.keys.index(k) for k in self.compact_keys]
            self._full_layout = full
        envs = 1 if self.ndim == 1 else self._batch_shape(data)[0]
        rows = self._time_capacity(envs)
        lead = (rows,) if self.ndim == 1 else (envs, rows)
        if self.check_memory:
            self._check_fits(layout.bytes_per_item(), rows * envs)
        leaves = self._allocate_leaves(
            [torch.Size([*lead, *s]) for s in layout.shapes], layout.dtypes
        )
        if self.compact_keys:
            self._compact = CompactNext(len(self.compact_keys), rows, self.device)
            self._compact.allocate_pools([layout.shapes[i] for i in self._compact_pos],
                                         [layout.dtypes[i] for i in self._compact_pos])  # fmt: skip
        self._leaves, self._layout, self._envs = leaves, layout, envs

    def _ignored(self) -> tuple[tuple[str, ...], ...]:
        return getattr(self, "_ignore_keys", ())

    def set_ignored_keys(self, keys: Sequence[NestedKey]) -> None:
        """Keys that writes skip (the buffer's ``index`` and weight keys)."""
        self._ignore_keys = tuple(as_tuple(k) for k in keys)

    # -- reads and writes --------------------------------------------------------------
    def _data_leaves(self, data: Any) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        if self._compact is None:
            return self._layout.leaves(data, self.ndim, self._ignored()), []
        full = self._full_layout.leaves(data, self.ndim, self._ignored())
        by_key = dict(zip(self._full_layout.keys, full, strict=False))
        return [by_key[k] for k in self._layout.keys], [by_key[k] for k in self._next_keys]

    def set(self, index: slice | torch.Tensor | range | Sequence[int], data: Any) -> None:
        """Writes ``data`` at positions ``index`` (a slice, a range, a list or a tensor)."""
        index = _as_index(index)
        if self._layout is None:
            self._initialize(data)
        leaves, nxt = self._data_leaves(data)  # validates everything before any write
        envs = leaves[0].shape[0] if self.ndim == 2 else 1
        if self.ndim == 2 and envs != self._envs:
            raise ValueError(
                f"the storage holds {self._envs} envs, the data has {envs} (its dim 0)."
            )
        if isinstance(index, torch.Tensor):
            index = index.to(self.device)
            n, last = index.numel(), int(index[-1]) if index.numel() else -1
            top = int(index.max()) + 1 if n else 0
        else:
            n, last, top = index.stop - index.start, index.stop - 1, index.stop
        if self._compact is not None:
            pos = (
                index
                if isinstance(index, torch.Tensor)
                else torch.arange(index.start, index.stop, device=self.device)
            )
            self._compact.before_write(pos, [leaves[i].to(self.device) for i in self._compact_pos],
                                       [x.to(self.device) for x in nxt],
                                       [self._leaves[i] for i in self._compact_pos], self._filled)  # fmt: skip
        for buf, leaf in zip(self._leaves, leaves, strict=False):
            if self.ndim == 1:
                buf[index] = leaf
            else:
                buf[:, index] = leaf
        if n:
            self._filled = max(self._filled, top)
            self._cursor = (last + 1) % self._leaves[0].shape[self.ndim - 1]
            self._write_count += 1
        self._after_write()

    def _after_write(self) -> None:
        """Hook for storages that persist their length (memory-mapped ones)."""

    def get(self, index: torch.Tensor, extra: dict[str, torch.Tensor] | None = None) -> Any:
        """Reads the items at ``index``.

        Args:
            index: ``[n]`` positions (1-d storages) or ``[n, 2]`` ``(env, time)`` pairs.
            extra: root entries added to a sampled TensorDict as it is built
                (the buffer's ``"index"``); ignored for tensor and pytree layouts.
        """
        if self._layout is None:
            raise RuntimeError(f"{type(self).__name__} is empty: write data before reading it.")
        if not isinstance(index, torch.Tensor):
            index = _as_index(index)
            if isinstance(index, slice):
                index = torch.arange(index.start, index.stop)
        if index.device != self.device:
            index = index.to(self.device)
        if self.ndim == 1:
            out = [buf.index_select(0, index) for buf in self._leaves]
            batch = index.shape
        else:
            env, t = index[..., 0], index[..., 1]
            out = [buf[env, t] for buf in self._leaves]
            batch = env.shape
        if self._compact is None:
            return self._layout.build(out, batch, extra, self.device)
        derived = self._compact.derive(index, [self._leaves[i] for i in self._compact_pos])
        by_key = dict(zip(self._layout.keys, out, strict=False))
        by_key.update(zip(self._next_keys, derived, strict=False))
        leaves = [by_key[k] for k in self._full_layout.keys]
        return self._full_layout.build(leaves, batch, extra, self.device)

    def get_leaf(self, key: NestedKey) -> torch.Tensor:
        """The stored values of one entry over the filled range: ``[len]`` or ``[envs, filled]``."""
        if self._layout is None:
            raise RuntimeError(f"{type(self).__name__} is empty.")
        key = as_tuple(key)
        if key not in self._layout.keys:
            raise KeyError(f"the storage has no entry {key!r}; it holds {self._layout.keys}.")
        buf = self._leaves[self._layout.keys.index(key)]
        return buf[: self._filled] if self.ndim == 1 else buf[:, : self._filled]

    def set_leaf_(self, key: NestedKey, value: torch.Tensor, index: Any = slice(None)) -> None:
        """Overwrites entry ``key`` at ``index`` of the filled range, in place (a write).

        Raises:
            KeyError: the storage has no entry ``key``.
            RuntimeError: ``value`` does not broadcast to the selected items.
        """
        leaf = self.get_leaf(key)
        if isinstance(index, torch.Tensor):
            index = index.to(leaf.device)
        leaf[index] = torch.as_tensor(value).to(device=leaf.device, dtype=leaf.dtype)
        self._write_count += 1
        self._after_write()

    def has_key(self, key: NestedKey) -> bool:
        return self._layout is not None and as_tuple(key) in self._layout.keys

    def nbytes(self) -> int:
        """Bytes held by the storage's tensors (and the compact side pool)."""
        own = sum(b.numel() * b.element_size() for b in self._leaves)
        return own + (self._compact.nbytes() if self._compact is not None else 0)

    def empty(self) -> None:
        self._filled = 0
        self._cursor = 0
        self._write_count += 1
        if self._compact is not None:
            self._compact.clear()
        self._after_write()

    # -- checkpoints -------------------------------------------------------------------
    def state_dict(self) -> dict:
        if self._layout is None:
            return {"layout": None}
        filled = self._filled
        leaves = [
            b[:filled].cpu().clone() if self.ndim == 1 else b[:, :filled].cpu().clone()
            for b in self._leaves
        ]
        full = getattr(self, "_full_layout", None)
        return {
            "layout": self._layout.to_meta(),
            "full_layout": full.to_meta() if full is not None else None,
            "treespec": self._layout.treespec,
            "leaves": leaves, "filled": filled, "cursor": self._cursor, "envs": self._envs,
            "max_size": self.max_size, "ndim": self.ndim,
            "compact": self._compact.state_dict() if self._compact is not None else None,
        }  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        if state["layout"] is None:
            self.empty()
            return
        if state["max_size"] != self.max_size or state["ndim"] != self.ndim:
            raise ValueError(
                f"the checkpoint holds a storage of max_size={state['max_size']}, ndim={state['ndim']}; "
                f"this one has max_size={self.max_size}, ndim={self.ndim}: build it with the same values."
            )
        layout = Layout.from_meta(state["layout"], state["treespec"])
        if self._layout is None:
            lead = (state["envs"], self._time_capacity(state["envs"])) if self.ndim == 2 else ()
            example = layout.build(
                [torch.empty((*(lead or (1,)), *s), dtype=d) for s, d in zip(layout.shapes, layout.dtypes, strict=False)],
                torch.Size(lead or (1,)),
            )  # fmt: skip
            if state["full_layout"] is not None:
                full = Layout.from_meta(state["full_layout"])
                example = full.build(
                    [torch.empty((1, *s), dtype=d) for s, d in zip(full.shapes, full.dtypes, strict=False)], torch.Size([1])
                )  # fmt: skip
            self._initialize(example)
        elif self._layout.to_meta() != state["layout"]:
            raise ValueError("the checkpoint's keys, shapes or dtypes differ from this storage's.")
        filled = state["filled"]
        for buf, leaf in zip(self._leaves, state["leaves"], strict=False):
            if self.ndim == 1:
                buf[:filled] = leaf.to(self.device)
            else:
                buf[:, :filled] = leaf.to(self.device)
        self._filled, self._cursor = filled, state["cursor"]
        if self._compact is not None:
            self._compact.load_state_dict(state["compact"])
        self._write_count += 1
        self._after_write()

    def dumps(self, path: Path) -> None:
        """Saves the storage into folder ``path``, in its :attr:`checkpointer`'s format if set."""
        if self.checkpointer is not None:
            self.checkpointer.dumps(self, path)
            return
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), path / "tensor_storage.pt")

    def loads(self, path: Path) -> None:
        """Restores what :meth:`dumps` saved (with the same :attr:`checkpointer`)."""
        if self.checkpointer is not None:
            self.checkpointer.loads(self, path)
            return
        self.load_state_dict(torch.load(Path(path) / "tensor_storage.pt", weights_only=False))


class LazyTensorStorage(TensorStorage):
    """A :class:`TensorStorage` allocated on the first write, on any device.

    Before allocating, it computes ``bytes per item x capacity`` and raises
    :class:`~rl_buffers.StorageMemoryError` (with the figure) if the device
    cannot hold it, instead of being killed mid-extend.

    Args:
        max_size: the capacity in items.
        device: where the tensors live. Default: ``"cpu"``.
        ndim: 1 (items) or 2 (``[envs, time]``).
        compact_keys: observation keys stored once, ``("next", key)`` derived on read.
        check_memory: check that the allocation fits first. Default: ``True``.
        compilable: TorchRL's flag, kept (see :attr:`Storage.compilable`).

    Examples:
        >>> from tensordict import TensorDict
        >>> storage = LazyTensorStorage(100)
        >>> storage.set(slice(0, 2), TensorDict(obs=torch.zeros(2, 3), batch_size=[2]))
        >>> len(storage), storage.get(torch.tensor([1]))["obs"].shape
        (2, torch.Size([1, 3]))
    """
