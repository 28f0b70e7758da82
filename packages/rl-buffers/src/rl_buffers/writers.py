"""Writers: where incoming items go in the storage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tensordict import is_tensor_collection

from rl_buffers._layout import NestedKey, as_tuple, expand_to_batch
from rl_buffers.storages import _generations as generations
from rl_buffers.storages.base import Storage


class FolderState:
    """``dumps`` / ``loads`` of a writer's ``state_dict`` as ``writer.pt`` in a directory."""

    def dumps(self, path: str | Path) -> None:
        """Saves :meth:`state_dict` into directory ``path`` (created if missing)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), path / "writer.pt")

    def loads(self, path: str | Path) -> None:
        """Restores what :meth:`dumps` saved at ``path``."""
        self.load_state_dict(torch.load(Path(path) / "writer.pt", weights_only=True))


class RoundRobinWriter(FolderState):
    """Writes at a cursor that wraps around: the oldest items are overwritten first.

    Args:
        compilable: TorchRL's flag, kept (no multiprocessing bookkeeping here).
        track_generations: stamp every slot with the number of times it was written
            (kept on the storage, see :mod:`rl_buffers.storages._generations`):
            samples then carry ``"index_generation"``, and :meth:`generations_of`
            tells whether a sampled record was overwritten since.

    Examples:
        >>> from rl_buffers import LazyTensorStorage
        >>> writer = RoundRobinWriter(track_generations=True)
        >>> writer.register_storage(LazyTensorStorage(3))
        >>> writer.extend(torch.arange(4.0))
        tensor([0, 1, 2, 0])
        >>> writer.generations_of(torch.arange(3))
        tensor([1, 0, 0])
    """

    def __init__(self, compilable: bool = False, *, track_generations: bool = False) -> None:
        self._compilable = bool(compilable)  # TorchRL's flag; no mp bookkeeping to replace here
        self._storage: Storage | None = None
        self._cursor = 0
        self._write_count = 0  # items written through add / extend (TorchRL's counter)
        self._track_generations = bool(track_generations)
        self._slot_generations: torch.Tensor | None = None  # stamps set before a storage exists

    def register_storage(self, storage: Storage) -> None:
        """Attaches the storage; the cursor resumes where the storage's last write ended."""
        self._storage = storage
        self._cursor = storage.last_cursor if len(storage) else 0
        if self._track_generations:
            generations.enable(storage)
            if self._slot_generations is not None:
                generations.set_table(storage, self._slot_generations)
                self._slot_generations = None

    @property
    def tracks_generations(self) -> bool:
        """Whether this writer asked for slot generations (``track_generations=True``)."""
        return self._track_generations

    @property
    def _generation(self) -> torch.Tensor | None:
        """The slot stamps (TorchRL's attribute); they live on the storage once registered."""
        holder = self._storage if self._storage is not None else self
        return generations.table(holder)

    @_generation.setter
    def _generation(self, stamps: torch.Tensor) -> None:
        if self._storage is None:
            self._slot_generations = torch.as_tensor(stamps, dtype=torch.int64).clone()
        else:
            generations.set_table(self._storage, stamps)

    def generations_of(self, index: Any) -> torch.Tensor:
        """The generation of the slots at ``index`` (``-1``: never written, out of range, or
        not tracked). Compare with a sample's ``"index_generation"`` to spot overwritten data."""
        holder = self._storage if self._storage is not None else self
        if not self._track_generations and generations.table(holder) is None:
            return generations.lookup(None, index)
        return generations.lookup(holder, index)

    def write_at(self, index: torch.Tensor, data: Any) -> None:
        """Overwrites the slots ``index`` with ``data`` (the cursor does not move)."""
        index = torch.as_tensor(index)
        self._storage.set(index, data)
        generations.bump(self._storage, index, self._storage.write_capacity(data))

    def add(self, data: Any) -> torch.Tensor:
        """Writes one item batch of size 1 (the buffer adds the batch dim)."""
        return self.extend(data)

    def extend(self, data: Any) -> torch.Tensor:
        """Writes a batch and returns the positions written, in order (``[n]``)."""
        storage = self._storage
        n = storage.n_items(data)
        capacity = storage.write_capacity(data)
        positions = (self._cursor + torch.arange(n)) % capacity
        if n > capacity:  # only the last `capacity` items can survive; write just those
            data = storage.take(data, n - capacity)
            start = (self._cursor + n - capacity) % capacity
            index = (start + torch.arange(capacity)) % capacity
        elif self._cursor + n <= capacity:
            index = slice(self._cursor, self._cursor + n)
        else:
            index = positions
        if n:
            storage.set(index, data)
            self._cursor = (self._cursor + n) % capacity
            self._write_count += n
            generations.bump(storage, positions, capacity)
        return positions

    def empty(self, empty_write_count: bool = True) -> None:
        """Moves the cursor back to 0; ``empty_write_count=False`` keeps the write counter."""
        self._cursor = 0
        if empty_write_count:
            self._write_count = 0

    def state_dict(self) -> dict:
        state: dict[str, Any] = {"_cursor": self._cursor, "_write_count": self._write_count}
        stamps = self._generation if self._track_generations else None
        if stamps is not None:
            state["_generation"] = stamps.cpu().clone()
        return state

    def load_state_dict(self, state: dict) -> None:
        # TorchRL's keys; "cursor" / "write_count" are this package's older ones
        self._cursor = int(state["_cursor"] if "_cursor" in state else state["cursor"])
        self._write_count = int(state.get("_write_count", state.get("write_count", 0)))
        if state.get("_generation") is not None:
            self._generation = state["_generation"]


class TensorDictRoundRobinWriter(RoundRobinWriter):
    """A :class:`RoundRobinWriter` for TensorDicts that also writes ``"index"`` into the data.

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage
        >>> writer = TensorDictRoundRobinWriter()
        >>> writer.register_storage(LazyTensorStorage(3))
        >>> data = TensorDict(x=torch.zeros(2), batch_size=[2])
        >>> _ = writer.extend(data)
        >>> data["index"]
        tensor([0, 1])
    """

    def extend(self, data: Any) -> torch.Tensor:
        index = super().extend(data)
        if is_tensor_collection(data) and not data.is_locked:
            _set_index(data, index, self._storage)
        return index


def _set_index(data: Any, positions: torch.Tensor, storage: Storage) -> None:
    if storage.ndim == 1:
        positions = positions.to(data.device) if data.device is not None else positions
        data.set("index", expand_to_batch(positions, data))
    else:
        envs, steps = data.shape[0], data.shape[1]
        env = torch.arange(envs).unsqueeze(-1).expand(envs, steps)
        data.set("index", torch.stack([env, positions.expand(envs, steps)], -1))


_REDUCTIONS = ("sum", "max", "min", "mean", "median")


class TensorDictMaxValueWriter(FolderState):
    """Keeps the ``max_size`` items of highest rank (e.g. the best episodes).

    The rank of an item is ``data[rank_key]`` reduced over its non-batch dims.
    A full storage replaces its lowest-ranked item when a higher one arrives;
    items that rank too low are not written and get index ``-1``.

    Args:
        rank_key: the entry to rank by. Default: ``("next", "reward")``.
        reduction: ``"sum"``, ``"max"``, ``"min"``, ``"mean"`` or ``"median"`` over non-batch dims.
        compilable: TorchRL's flag, kept (the writer keeps no multiprocessing state).

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage
        >>> writer = TensorDictMaxValueWriter(rank_key="r")
        >>> writer.register_storage(LazyTensorStorage(2))
        >>> writer.extend(TensorDict(r=torch.tensor([1.0, 5.0, 3.0]), batch_size=[3]))
        tensor([-1,  0,  1])
    """

    def __init__(
        self, rank_key: NestedKey | None = None, reduction: str = "sum", compilable: bool = False
    ) -> None:
        self._compilable = bool(compilable)  # TorchRL's flag, kept
        if reduction not in _REDUCTIONS:
            raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}.")
        self.rank_key = as_tuple(rank_key) if rank_key is not None else ("next", "reward")
        self.reduction = reduction
        self._storage: Storage | None = None
        self._ranks: torch.Tensor | None = None
        self._write_count = 0

    tracks_generations = False  # slot generations are a round-robin writer feature

    def generations_of(self, index: Any) -> torch.Tensor:
        """``-1`` for every slot: this writer does not track generations."""
        return generations.lookup(None, index)

    @property
    def _cursor(self) -> int:
        """TorchRL's cursor for this writer: where the next item goes while the storage fills
        (the stored count modulo the capacity; a full storage replaces its lowest item)."""
        return len(self._storage) % self._storage.max_size if self._storage is not None else 0

    def register_storage(self, storage: Storage) -> None:
        if storage.ndim != 1:
            raise ValueError(
                "TensorDictMaxValueWriter is not compatible with storages with more than one "
                f"dimension: got ndim={storage.ndim}; use a 1-d storage (ndim=1)."
            )
        self._storage = storage
        if self._ranks is None or self._ranks.numel() != storage.max_size:
            self._ranks = torch.full((storage.max_size,), float("-inf"), dtype=torch.float64)

    def _rank(self, data: Any) -> torch.Tensor:
        if not is_tensor_collection(data):
            raise RuntimeError(
                "TensorDictMaxValueWriter expects data to be a tensor collection (a TensorDict "
                f"holding {self.rank_key!r}); got {type(data).__name__}. Use RoundRobinWriter for "
                "other data."
            )
        try:
            value = data.get(self.rank_key)
        except KeyError:
            value = None
        if value is None:
            raise KeyError(
                f"TensorDictMaxValueWriter: the data has no rank entry {self.rank_key!r}."
            )
        value = value.reshape(value.shape[0], -1).double().cpu()
        if self.reduction in ("max", "min", "median"):
            return getattr(value, self.reduction)(-1).values
        return getattr(value, self.reduction)(-1)

    def add(self, data: Any) -> torch.Tensor:
        return self.extend(data)

    def extend(self, data: Any) -> torch.Tensor:
        """Writes the items that rank high enough; returns their positions (``-1`` = dropped)."""
        rank = self._rank(data)
        n, cap = rank.numel(), self._ranks.numel()
        self._write_count += n
        # Rank the stored items and the new ones together; keep the top `cap`
        # (ties keep what is already stored).
        pool = torch.cat([self._ranks, rank])
        order = torch.sort(pool, descending=True, stable=True).indices[:cap]
        kept = torch.zeros(pool.numel(), dtype=torch.bool)
        kept[order] = True
        new_kept = kept[cap:].nonzero().squeeze(-1)
        stored = len(self._storage)
        occupied = torch.arange(cap) < stored
        free = (~(kept[:cap] & occupied)).nonzero().squeeze(-1)
        # Fill empty positions first, lowest first, so that the storage stays dense.
        free = torch.cat([free[free >= stored], free[free < stored]])
        positions = torch.full((n,), -1, dtype=torch.long)
        if new_kept.numel():
            targets = free[: new_kept.numel()]
            positions[new_kept] = targets
            self._write(targets, data[new_kept])
            self._ranks[targets] = rank[new_kept]
        if is_tensor_collection(data) and not data.is_locked:
            data.set("index", positions)
        return positions

    def _write(self, targets: torch.Tensor, data: Any) -> None:
        storage = self._storage
        # fill empty positions in order so that the storage stays dense
        order = torch.argsort(targets)
        storage.set(targets[order], data[order])

    def empty(self, empty_write_count: bool = True) -> None:
        self._ranks.fill_(float("-inf"))
        if empty_write_count:
            self._write_count = 0

    @property
    def _current_top_values(self) -> list[float]:
        """The ranks of the stored items (TorchRL's attribute)."""
        if self._ranks is None:
            return []
        return self._ranks[torch.isfinite(self._ranks)].tolist()

    def state_dict(self) -> dict:
        return {"ranks": self._ranks.clone(), "write_count": self._write_count}

    def load_state_dict(self, state: dict) -> None:
        self._ranks = state["ranks"].clone()
        self._write_count = int(state.get("write_count", 0))


class ImmutableDatasetWriter:
    """The writer of a dataset buffer: refuses every write, so a loaded dataset stays as it was.

    Examples:
        >>> from rl_buffers import LazyTensorStorage, ReplayBuffer
        >>> storage = LazyTensorStorage(3)
        >>> storage.set(torch.arange(3), torch.zeros(3))
        >>> rb = ReplayBuffer(storage=storage, writer=ImmutableDatasetWriter())
        >>> len(rb)
        3
    """

    def __init__(self, compilable: bool = False) -> None:
        self._compilable = bool(compilable)
        self._storage: Storage | None = None

    def register_storage(self, storage: Storage) -> None:
        self._storage = storage

    def add(self, data: Any) -> torch.Tensor:
        return self.extend(data)

    def extend(self, data: Any) -> torch.Tensor:
        raise RuntimeError(
            "this buffer holds a fixed dataset (ImmutableDatasetWriter): it cannot be written to. "
            "Copy what you need into a ReplayBuffer of your own to add data."
        )

    def empty(self, empty_write_count: bool = True) -> None:
        raise RuntimeError(
            "this buffer holds a fixed dataset (ImmutableDatasetWriter): it cannot be emptied."
        )

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Nothing to restore: the writer has no state."""
