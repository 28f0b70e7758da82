"""``ReplayBuffer``: a storage, a sampler and a writer behind one thread-safe API."""

from __future__ import annotations

import collections
import operator
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch
import torch.utils._pytree as pytree
from tensordict import is_tensor_collection

from rl_buffers import _prefetch_state as prefetch_state
from rl_buffers._buffer_checkpoint import Checkpointing
from rl_buffers._buffer_consume import consuming_write
from rl_buffers._buffer_inplace import InPlaceWrites, unsqueeze
from rl_buffers._buffer_parts import BUILT_ON_INIT, Parts, built, built_instance
from rl_buffers._buffer_query import TrajectoryQueries
from rl_buffers._buffer_update import ConditionalUpdates
from rl_buffers._transforms import BufferTransforms
from rl_buffers.sample_units import SampleUnit
from rl_buffers.samplers.base import Sampler
from rl_buffers.samplers.consuming import ConsumingSampler
from rl_buffers.samplers.random import RandomSampler
from rl_buffers.storages import _generations as generations
from rl_buffers.storages.base import Storage
from rl_buffers.storages.list_storage import ListStorage
from rl_buffers.writers import RoundRobinWriter


def _consuming_sampler(
    sampler: Any, consume_after_n_samples: int | None, prefetch: int | None
) -> Any:
    """The sampler of a buffer built with ``consume_after_n_samples`` (checked)."""
    consuming = consume_after_n_samples is not None or isinstance(sampler, ConsumingSampler)
    if consuming and prefetch:
        raise ValueError(
            "Prefetching is not supported with consume_after_n_samples / ConsumingSampler "
            "(prefetched batches would consume items early): pass prefetch=None."
        )
    if consume_after_n_samples is None:
        return sampler
    if sampler is not None and not (sampler is RandomSampler or type(sampler) is RandomSampler):
        raise ValueError(
            "consume_after_n_samples only supports the default RandomSampler (it replaces it "
            f"with a ConsumingSampler); got {type(sampler).__name__}."
        )
    return ConsumingSampler(consume_after_n_samples)


def _check_batch_size(batch_size: Any, where: str) -> None:
    """A batch size is a positive int: 0 would give empty batches (and iterate forever)."""
    try:
        value = None if isinstance(batch_size, bool) else operator.index(batch_size)
    except TypeError:
        value = None
    if value is None or value < 1:
        raise ValueError(
            f"{where} must be a positive int (the number of items per batch); got {batch_size!r}. "
            "A batch of 0 items would make losses NaN and iteration never end: pass at least 1."
        )


def stack_items(items: list[Any]) -> Any:
    """The default collate function of list storages: stacks tensors, TensorDicts or pytrees."""
    first = items[0]
    if is_tensor_collection(first) or isinstance(first, torch.Tensor):
        return torch.stack(items)
    leaves = pytree.tree_leaves(first)
    if leaves and all(isinstance(x, torch.Tensor) for x in leaves):
        return pytree.tree_map(lambda *xs: torch.stack(xs), *items)
    return items


class ReplayBuffer(InPlaceWrites, Checkpointing, TrajectoryQueries, ConditionalUpdates):
    """A replay buffer of tensors, pytrees of tensors, TensorDicts or any object.

    Args:
        storage: where items live. Default: ``ListStorage(1000)``.
        sampler: which items a batch reads. Default: :class:`RandomSampler`.
        writer: where new items go. Default: :class:`RoundRobinWriter`.
        collate_fn: turns what the storage returns into a batch. Default: stacks
            the items of a :class:`ListStorage`; identity for tensor storages.
        pin_memory: pin sampled CPU tensors.
        prefetch: number of batches sampled ahead in a background thread.
        storage, sampler, writer: an object, or a factory (class, function, ``partial``)
            called when the buffer is built (see ``delayed_init``).
        transform: any callable applied to each sampled batch (TensorDict -> TensorDict).
            If it also has an ``inv`` method (an env transform, e.g.
            ``CatFrames(as_inverse=True)``), TensorDicts written by :meth:`extend` /
            :meth:`add` go through ``transform.inv`` first, as in TorchRL. More can be
            added with :meth:`append_transform` / :meth:`insert_transform`.
        transform_factory: a callable returning the transform, called when the buffer
            is built (e.g. in the process that uses it). Not with ``transform``.
        batch_size: the default of :meth:`sample`.
        generator: the ``torch.Generator`` of every random draw of the sampler (same
            seed, same samples); ``None``: torch's global generator. See :meth:`set_rng`.
        shared: the buffer will be shared between processes (see :meth:`share`); it
            cannot prefetch.
        delayed_init: build the parts on first use (``initialized`` says whether that
            happened) rather than here. Default: ``True`` when ``transform_factory`` is
            given, else ``False``, as in TorchRL.
        sample_unit: what each sampled index expands into (a :class:`~rl_buffers.SampleUnit`):
            ``None`` or :class:`~rl_buffers.Transition` give one item each,
            :class:`~rl_buffers.Sequence` a window of steps around it. Entries the unit
            adds to the info (masks, ``anchor_index``) are also written into TensorDict
            samples.
        consume_after_n_samples: each item is sampled at most this many times, then leaves
            the buffer (``len`` drops) and its slot is refilled first by the next writes
            (a :class:`~rl_buffers.samplers.ConsumingSampler` replaces the default sampler).
        compilable: accepted for TorchRL compatibility and passed to the default
            storage; the storages here keep no multiprocessing bookkeeping, so every
            one can be read under ``torch.compile``.

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(100), batch_size=4)
        >>> _ = rb.extend(TensorDict(obs=torch.randn(10, 3), batch_size=[10]))
        >>> len(rb), rb.sample()["obs"].shape
        (10, torch.Size([4, 3]))
    """

    _sample_unit: SampleUnit | None = None
    _track_generations = False  # the writer stamps slot generations (set when built)
    _ran_out = False  # whether the last batch sample() returned ended the sampler's epoch

    def __init__(
        self,
        *,
        storage: Storage | Callable[[], Storage] | None = None,
        sampler: Sampler | Callable[[], Sampler] | None = None,
        writer: Any | None = None,
        collate_fn: Callable[[Any], Any] | None = None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform: Callable[[Any], Any] | None = None,
        transform_factory: Callable[[], Callable[[Any], Any]] | None = None,
        batch_size: int | None = None,
        generator: torch.Generator | None = None,
        shared: bool = False,
        compilable: bool | None = None,
        delayed_init: bool | None = None,
        sample_unit: SampleUnit | None = None,
        consume_after_n_samples: int | None = None,
    ) -> None:
        sampler = _consuming_sampler(sampler, consume_after_n_samples, prefetch)
        if sample_unit is not None and not isinstance(sample_unit, SampleUnit):
            raise TypeError(
                "sample_unit must be a SampleUnit instance (Transition(), Sequence(length=...)); "
                f"got {type(sample_unit).__name__}."
            )
        self._sample_unit = sample_unit
        if transform is not None and transform_factory is not None:
            raise ValueError("pass transform or transform_factory, not both.")
        if shared and prefetch:
            raise ValueError(
                "Cannot share prefetched replay buffers: a shared buffer cannot prefetch; "
                "pass prefetch=0 (or None), or shared=False."
            )
        self._parts = Parts(storage, sampler, writer, transform, transform_factory,
                            collate_fn, bool(compilable), generator)  # fmt: skip
        if batch_size is not None:
            _check_batch_size(batch_size, "ReplayBuffer(batch_size=...)")
        self._batch_size = batch_size
        self._prefetch = int(prefetch or 0)
        self._pin_memory = pin_memory
        self.shared = bool(shared)
        self._lock = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._futures: collections.deque[Future] = collections.deque()
        if delayed_init is None:
            delayed_init = transform_factory is not None
        if not delayed_init:
            self._initialize()

    def _initialize(self) -> None:
        """Builds the storage, sampler, writer and transforms (factories are called here)."""
        parts: Parts = self.__dict__.pop("_parts")
        storage = built(parts.storage, Storage)
        self._storage = (
            ListStorage(1000, compilable=parts.compilable) if storage is None else storage
        )
        sampler = built(parts.sampler, Sampler)
        self._sampler = RandomSampler() if sampler is None else sampler
        if getattr(self._sampler, "drop_last", False) and self._batch_size is None:
            raise ValueError(
                "Samplers with drop_last=True must work with a predictable batch-size: "
                f"{type(self._sampler).__name__}(drop_last=True) needs ReplayBuffer(batch_size=...)."
            )
        writer = built(parts.writer, None)
        self._writer = self._default_writer() if writer is None else writer
        if isinstance(self._sampler, ConsumingSampler):
            if self._storage.ndim != 1:
                raise ValueError(
                    "consume_after_n_samples / ConsumingSampler work with 1-dimensional storages "
                    f"only; this storage has ndim={self._storage.ndim}."
                )
            if not callable(getattr(self._writer, "write_at", None)):
                raise TypeError(
                    "consume_after_n_samples requires a writer with a callable write_at(index, data) "
                    f"(to refill consumed slots); {type(self._writer).__name__} has none."
                )
        self._writer.register_storage(self._storage)
        self._track_generations = bool(getattr(self._writer, "tracks_generations", False))
        collate_fn = parts.collate_fn
        if collate_fn is None:
            stacks = isinstance(self._storage, ListStorage) and not getattr(
                self._storage, "stacks_items", False
            )
            collate_fn = stack_items if stacks else None
        self._collate_fn = collate_fn
        self._transform = BufferTransforms()
        transform = parts.transform_factory() if parts.transform_factory else parts.transform
        if transform is not None:
            self._transform.append(transform)
        if hasattr(self._storage, "set_ignored_keys"):
            self._storage.set_ignored_keys(self._ignored_keys())
        self._rng: torch.Generator | None = None
        if parts.generator is not None:
            self.set_rng(parts.generator)

    def __getattr__(self, name: str) -> Any:
        # A buffer built with delayed_init=True builds its parts on first use.
        if name in BUILT_ON_INIT and "_parts" in self.__dict__:
            self._initialize()
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def initialized(self) -> bool:
        """Whether the storage, sampler and writer are built (see ``delayed_init``)."""
        return "_parts" not in self.__dict__

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_lock", "_executor", "_futures"):
            state.pop(name, None)
        # the queued batches travel too, so the copy samples what the original would
        state["_prefetch_state"] = prefetch_state.snapshot(self._futures, self._prefetch)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        queued = state.pop("_prefetch_state", None)
        self.__dict__.update(state)
        self._lock = threading.RLock()
        self._executor = None
        self._futures = prefetch_state.restore(queued)

    @property
    def _prefetch_queue(self) -> collections.deque[Future]:
        """The futures of the prefetched batches (TorchRL's attribute), oldest first."""
        return self._futures

    def share(self, shared: bool = True) -> ReplayBuffer:
        """Marks the buffer as shared between processes (TorchRL's API); returns it.

        A shared buffer cannot prefetch (the background thread would not be shared).
        """
        if shared and self._prefetch:
            raise ValueError(
                "Cannot share prefetched replay buffers (a shared buffer cannot prefetch): "
                "build it with prefetch=0 (or None), or keep shared=False."
            )
        self.shared = bool(shared)
        return self

    def stats(self) -> dict[str, int | float | bool]:
        """A cheap, JSON-serialisable snapshot: size, write count, capacity, utilization.

        It reads counters only: it never builds a ``delayed_init`` buffer nor changes
        what the next sample returns.

        Examples:
            >>> from rl_buffers import LazyTensorStorage
            >>> rb = ReplayBuffer(storage=LazyTensorStorage(10))
            >>> _ = rb.extend(torch.arange(5))
            >>> s = rb.stats()
            >>> s["size"], s["write_count"], s["capacity"], s["utilization"]
            (5, 5, 10, 0.5)
        """
        initialized = self.initialized
        storage = self._storage if initialized else built_instance(self._parts.storage)
        size = len(self) if initialized else 0
        stats: dict[str, int | float | bool] = {
            "size": int(size),
            "write_count": int(getattr(self._writer, "_write_count", 0)) if initialized else 0,
            "prefetch_queue_size": len(self._futures),
            "initialized": initialized,
        }
        capacity = getattr(storage, "max_size", None)
        if storage is None and not initialized:
            capacity = 1000  # the default ListStorage's
        if isinstance(capacity, int):
            stats["capacity"] = capacity
            stats["utilization"] = size / capacity if capacity else 0.0
        return stats

    def set_rng(self, generator: torch.Generator | None) -> None:
        """Use ``generator`` for every random draw of the sampler (TorchRL's ``set_rng``).

        Examples:
            >>> from rl_buffers import LazyTensorStorage
            >>> rb = ReplayBuffer(storage=LazyTensorStorage(10), generator=torch.Generator().manual_seed(0))
            >>> _ = rb.extend(torch.arange(10))
            >>> first = rb.sample(4)
            >>> rb.set_rng(torch.Generator().manual_seed(0))
            >>> bool((rb.sample(4) == first).all())
            True
        """
        self._rng = generator
        for part in (self._storage, self._sampler, self._writer):
            part._rng = generator

    @property
    def generator(self) -> torch.Generator | None:
        """The generator of the sampler's draws (``None``: torch's global one)."""
        return self._rng

    def append_transform(
        self, transform: Callable[[Any], Any], *, invert: bool = False
    ) -> ReplayBuffer:
        """Adds a transform after the others (TorchRL's API); returns the buffer.

        Args:
            transform: a callable ``data -> data`` applied to sampled (and indexed) data,
                in order; its ``inv`` method, if any, runs on written TensorDicts.
            invert: swap the two: ``transform`` runs on :meth:`extend` / :meth:`add`
                and its ``inv`` (if any) on reads.

        Examples:
            >>> from rl_buffers import LazyTensorStorage
            >>> rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
            >>> _ = rb.append_transform(lambda x: x + 1, invert=True).append_transform(lambda x: x * 10)
            >>> _ = rb.extend(torch.zeros(4))
            >>> rb.sample().tolist()
            [10.0, 10.0]
        """
        self._transform.append(transform, invert)
        return self

    def insert_transform(
        self, index: int, transform: Callable[[Any], Any], *, invert: bool = False
    ) -> ReplayBuffer:
        """Inserts a transform at position ``index`` of the list (see :meth:`append_transform`)."""
        self._transform.insert(index, transform, invert)
        return self

    @property
    def transform(self) -> BufferTransforms:
        """The buffer's transforms (``len``, indexing)."""
        return self._transform

    def _default_writer(self) -> Any:
        return RoundRobinWriter()

    def _ignored_keys(self) -> tuple:
        return ()

    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def sampler(self) -> Sampler:
        return self._sampler

    @property
    def writer(self) -> Any:
        return self._writer

    @property
    def write_count(self) -> int:
        """Items written through :meth:`add` / :meth:`extend` since the buffer was built or
        emptied (checkpoints keep it)."""
        return int(getattr(self._writer, "_write_count", 0))

    @property
    def batch_size(self) -> int | None:
        return self._batch_size

    def __len__(self) -> int:
        """The stored items (not yet consumed, with ``consume_after_n_samples``)."""
        if not self.initialized:
            return 0
        live = getattr(self._sampler, "live_count", None)
        return live(self._storage) if live is not None else len(self._storage)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(storage={type(self._storage).__name__}(max_size={self._storage.max_size}), "
                f"sampler={type(self._sampler).__name__}, writer={type(self._writer).__name__}, len={len(self)})")  # fmt: skip

    # -- writes ------------------------------------------------------------------------
    def add(self, data: Any) -> torch.Tensor | int:
        """Writes one item; returns its index."""
        if isinstance(self._storage, ListStorage):
            # a TensorDict item goes as a batch of one, so that writers that read its
            # entries (TensorDictMaxValueWriter) see a TensorDict, not a list
            index = self.extend(data.unsqueeze(0) if is_tensor_collection(data) else [data])
            return int(index[0]) if index.numel() else index
        index = self.extend(unsqueeze(data, self._storage.ndim - 1))
        return int(index[0]) if self._storage.ndim == 1 and index.numel() else index

    def extend(self, data: Any, *, update_priority: bool | None = None) -> torch.Tensor:
        """Writes a batch (first dim; ``[envs, T]`` for 2-d storages); returns the positions written.

        The whole batch is checked against the storage's keys, shapes and dtypes
        before anything is written: a bad batch raises and leaves the buffer unchanged.
        ``update_priority`` is TorchRL's switch for priorities read from the data, which
        only :class:`TensorDictReplayBuffer` does; here it has no effect. A write transform
        that returns ``None`` (e.g. ``MCAdvantage`` holding an incomplete group) writes
        nothing: the returned index is empty.
        """
        if self._transform:
            data = self._transform.inv(data)
            if data is None:  # a write transform held the batch back: nothing written
                return torch.empty((0,) if self._storage.ndim == 1 else (0, 2), dtype=torch.long)
        with self._lock:
            self._futures.clear()
            if getattr(self._sampler, "take_free", None) is not None:
                index = consuming_write(self._writer, self._sampler, self._storage, data)
            else:
                index = self._writer.extend(data)
            self._sampler.extend(self._written(index, data), self._storage)
            return index

    def _written(self, index: torch.Tensor, data: Any) -> torch.Tensor:
        if self._storage.ndim == 1:
            return index
        envs = self._storage.shape[0]
        env = torch.arange(envs).unsqueeze(-1).expand(envs, index.numel())
        return torch.stack([env, index.expand(envs, index.numel())], -1).reshape(-1, 2)

    # -- reads -------------------------------------------------------------------------
    def _sample_once(self, batch_size: int) -> tuple[Any, dict[str, Any], bool]:
        """A batch, its info, and whether it was the sampler's last one (``ran_out``)."""
        with self._lock:
            sampler = self._sampler
            index, info = sampler.sample(self._storage, batch_size)
            ran_out = getattr(sampler, "ran_out", False)
            added: list[str] = []
            if self._sample_unit is not None or self._track_generations:
                index, info, added = self._expand(index, info)
            info["index"] = index
            data, written = self._read(index, info)
        if self._collate_fn is not None:
            data = self._collate_fn(data)
        data = self._post_sample(data, info, written)
        if added and is_tensor_collection(data):
            for key in added:
                value = info[key]
                if isinstance(value, torch.Tensor) and value.shape[:1] == data.shape[:1]:
                    data.set(key, value.to(data.device) if data.device is not None else value)
        if self._pin_memory:
            data = data.pin_memory()
        if self._transform:
            data = self._transform(data)
        return data, info, ran_out

    def _expand(
        self, index: torch.Tensor, info: dict[str, Any]
    ) -> tuple[torch.Tensor, dict[str, Any], list[str]]:
        """The sample unit's expansion and the slot generations; the info keys they add."""
        added: list[str] = []
        if self._sample_unit is not None:
            drawn = set(info)
            index, info = self._sample_unit.expand(index, info, self._storage)
            added = [key for key in info if key not in drawn]
        if self._track_generations:
            info["index_generation"] = self._writer.generations_of(index)
            added.append("index_generation")
        return index, info, added

    def _read(self, index: torch.Tensor, info: dict[str, Any]) -> tuple[Any, bool]:
        """The items at ``index``, and whether the buffer's own entries are already in them."""
        return self._storage.get(index), False

    def _post_sample(self, data: Any, info: dict[str, Any], written: bool = False) -> Any:
        """Adds the buffer's entries to a sampled batch (unless ``written`` by :meth:`_read`)."""
        return data

    def sample(self, batch_size: int | None = None, return_info: bool = False) -> Any:
        """A batch of ``batch_size`` items (default: the constructor's).

        Args:
            batch_size: items to sample.
            return_info: also return a dict with ``"index"`` (and weights for
                prioritized samplers).

        Raises:
            RuntimeError: the buffer is empty.
            ValueError: no batch size was given here or at construction.
        """
        if batch_size is None:
            batch_size = self._batch_size
            if batch_size is None:
                raise ValueError(
                    "sample() needs a batch_size: pass one here or to the constructor."
                )
        elif type(batch_size) is not int or batch_size < 1:
            _check_batch_size(batch_size, "sample(batch_size)")
        if self._prefetch and batch_size == self._batch_size:
            data, info, ran_out = self._prefetched(batch_size)
        else:
            data, info, ran_out = self._sample_once(batch_size)
        self._ran_out = ran_out  # of this batch: prefetching samplers run ahead of the caller
        return (data, info) if return_info else data

    def _prefetched(self, batch_size: int) -> tuple[Any, dict[str, Any], bool]:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="rl_buffers_prefetch"
            )
        if len(self) == 0:
            return self._sample_once(
                batch_size
            )  # raises the empty-buffer error here, not in a thread
        while len(self._futures) <= self._prefetch:
            self._futures.append(self._executor.submit(self._sample_once, batch_size))
        return self._futures.popleft().result()

    def __iter__(self) -> Iterator[Any]:
        """Yields batches of the default size until the sampler runs out (forever for random ones)."""
        if self._batch_size is None:
            raise ValueError("iterating needs a batch_size given to the constructor.")
        while True:
            yield self.sample()
            if self._ran_out:
                return

    def __getitem__(self, index: Any) -> Any:
        """Stored items by position, as TorchRL's ``rb[...]``: an int gives one item, a slice,
        a list or a tensor of positions give a batch (``[n, 2]`` ``(env, time)`` pairs for
        2-d storages), a key (``rb["obs"]``) that entry of every item. Transforms apply.

        Examples:
            >>> from rl_buffers import LazyTensorStorage
            >>> rb = ReplayBuffer(storage=LazyTensorStorage(10))
            >>> _ = rb.extend(torch.arange(5.0))
            >>> rb[:3].tolist(), float(rb[-1])
            ([0.0, 1.0, 2.0], 4.0)
        """
        if isinstance(index, str) or (
            isinstance(index, tuple) and index and all(isinstance(k, str) for k in index)
        ):
            return self[:][index]
        with self._lock:
            if isinstance(index, torch.Tensor) and self._storage.ndim == 2:
                data = self._storage.get(self._storage.checked_coords(index))
            else:
                data = self._storage[index]
        if not isinstance(index, int) and self._collate_fn is not None:
            data = self._collate_fn(data)
        if self._transform:
            data = self._transform(data)
        return data

    # -- priorities --------------------------------------------------------------------
    def update_priority(self, index: Any, priority: Any) -> None:
        """Sets the priorities of items ``index`` (prioritized samplers only)."""
        with self._lock:
            self._sampler.update_priority(index, priority, self._storage)

    # -- lifecycle ---------------------------------------------------------------------
    def empty(self, empty_write_count: bool = True) -> None:
        """Removes every item and resets the writer and the sampler.

        ``empty_write_count=False`` keeps the writer's count of items written (``stats()``).
        """
        with self._lock:
            self._futures.clear()
            self._storage.empty()
            generations.age(self._storage)
            self._writer.empty(empty_write_count=empty_write_count)
            self._sampler.empty()
