"""``ReplayBufferEnsemble``: sample batches made of sub-batches of several buffers (TorchRL's API)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection

from rl_buffers._transforms import BufferTransforms
from rl_buffers.replay_buffer import ReplayBuffer


def _stack(parts: list[Any]) -> Any:
    if all(is_tensor_collection(p) or isinstance(p, torch.Tensor) for p in parts):
        return torch.stack(parts)
    return parts


class ReplayBufferEnsemble:
    """Draws each batch from several replay buffers: ``num_buffer_sampled`` buffers are
    chosen (all of them with ``sample_from_all=True``, else uniformly or with probabilities
    ``p``, with replacement), each gives ``batch_size // num_buffer_sampled`` items from its
    own sampler (and its own transforms), and the sub-batches are stacked:
    ``[num_buffer_sampled, batch_size // num_buffer_sampled, ...]``. TensorDict batches
    carry ``("index", "buffer_ids")`` and ``("index", "index")``.

    The buffers keep being written to directly (``rb[i].extend(...)``); the ensemble
    only reads.

    Args:
        *rbs: the replay buffers.
        p: sampling probabilities of the buffers (normalized); not with ``sample_from_all``.
        sample_from_all: every batch holds one sub-batch of every buffer.
        num_buffer_sampled: buffers per batch (default: all of them).
        batch_size: the default of :meth:`sample`.
        transform: applied to each stacked batch (more with :meth:`append_transform`).
        generator: the generator that picks the buffers (``None``: torch's global one).

    Raises:
        ValueError: ``p`` has the wrong length or comes with ``sample_from_all=True``;
            ``batch_size`` is not a multiple of ``num_buffer_sampled``.

    Examples:
        >>> from rl_buffers import LazyTensorStorage
        >>> a, b = (ReplayBuffer(storage=LazyTensorStorage(10)) for _ in range(2))
        >>> _ = a.extend(torch.zeros(10)); _ = b.extend(torch.ones(10))
        >>> rb = ReplayBufferEnsemble(a, b, sample_from_all=True, batch_size=6)
        >>> rb.sample().tolist()
        [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
    """

    def __init__(
        self,
        *rbs: ReplayBuffer,
        p: Sequence[float] | torch.Tensor | None = None,
        sample_from_all: bool = False,
        num_buffer_sampled: int | None = None,
        batch_size: int | None = None,
        transform: Callable[[Any], Any] | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        if not rbs or not all(hasattr(rb, "sample") for rb in rbs):
            raise TypeError(
                "ReplayBufferEnsemble(*rbs) takes the replay buffers themselves, e.g. "
                "ReplayBufferEnsemble(rb0, rb1, p=[0.5, 0.5])."
            )
        self._rbs = list(rbs)
        if p is not None:
            if sample_from_all:
                raise ValueError("p and sample_from_all=True exclude each other: pass one.")
            p = torch.as_tensor(p, dtype=torch.float)
            if p.shape != (len(rbs),):
                raise ValueError(f"p has {p.numel()} probabilities for {len(rbs)} buffers.")
            p = p / p.sum().clamp_min(1e-6)
        self.p = p
        self.sample_from_all = sample_from_all
        self.num_buffer_sampled = (
            len(rbs) if sample_from_all or num_buffer_sampled is None else num_buffer_sampled
        )
        self._batch_size = batch_size
        self._transform = BufferTransforms()
        if transform is not None:
            self._transform.append(transform)
        self._rng = generator

    def __len__(self) -> int:
        return sum(len(rb) for rb in self._rbs)

    def append_transform(
        self, transform: Callable[[Any], Any], *, invert: bool = False
    ) -> ReplayBufferEnsemble:
        """Adds a transform applied to each stacked batch (see ``ReplayBuffer.append_transform``)."""
        self._transform.append(transform, invert)
        return self

    def _buffer_ids(self) -> torch.Tensor:
        n, k = len(self._rbs), self.num_buffer_sampled
        if self.sample_from_all:
            return torch.arange(n)
        if self.p is None:
            return torch.randint(n, (k,), generator=self._rng)
        return torch.multinomial(self.p, k, replacement=True, generator=self._rng)

    def sample(self, batch_size: int | None = None, return_info: bool = False) -> Any:
        """A batch of ``[num_buffer_sampled, batch_size // num_buffer_sampled]`` items."""
        batch_size = self._batch_size if batch_size is None else batch_size
        if batch_size is None:
            raise ValueError("sample() needs a batch_size: pass one here or to the constructor.")
        k = self.num_buffer_sampled
        if batch_size % k:
            raise ValueError(
                f"batch_size={batch_size} is not a multiple of num_buffer_sampled={k}: each "
                "buffer gives batch_size // num_buffer_sampled items."
            )
        buffer_ids = self._buffer_ids()
        parts, infos = zip(
            *(self._rbs[i].sample(batch_size // k, return_info=True) for i in buffer_ids.tolist()),
            strict=True,
        )
        data = _stack(list(parts))
        index = torch.stack([torch.as_tensor(info["index"]) for info in infos])
        info = {"index": index, "buffer_ids": buffer_ids}
        if all("priority_weight" in i for i in infos):
            info["priority_weight"] = torch.stack(
                [torch.as_tensor(i["priority_weight"]) for i in infos]
            )
        if isinstance(data, TensorDictBase):
            data = data.exclude("index")
            ids = buffer_ids.reshape(-1, *([1] * (data.ndim - 1))).expand(data.shape)
            data.set(("index", "buffer_ids"), ids)
            if index.shape[: data.ndim] == data.shape:
                data.set(("index", "index"), index)
        if self._transform:
            data = self._transform(data)
        return (data, info) if return_info else data

    def __iter__(self) -> Iterator[Any]:
        if self._batch_size is None:
            raise ValueError("iterating needs a batch_size given to the constructor.")
        while True:
            yield self.sample()

    def extend(self, data: Any) -> None:
        raise RuntimeError(
            "a ReplayBufferEnsemble only reads: extend one of its buffers (ensemble[i].extend(data))."
        )

    add = extend

    def __getitem__(self, index: Any) -> Any:
        """``rb[i]``: buffer ``i``; ``rb[i, ...]``: indexing into buffer ``i``; ``rb[:2]``,
        ``rb[[0, 2]]``, ``rb[tensor]``: an ensemble of those buffers (``rb[:]`` is ``rb``)."""
        if isinstance(index, tuple):
            return self._rbs[index[0]][index[1:] if len(index) > 2 else index[1]]
        if isinstance(index, int):
            return self._rbs[index]
        if isinstance(index, slice) and index == slice(None):
            return self
        chosen = torch.arange(len(self._rbs))[index].reshape(-1).tolist()
        return ReplayBufferEnsemble(
            *(self._rbs[i] for i in chosen),
            p=None if self.p is None else self.p[chosen],
            sample_from_all=self.sample_from_all,
            num_buffer_sampled=None if self.sample_from_all else self.num_buffer_sampled,
            batch_size=self._batch_size,
            generator=self._rng,
        )

    def __repr__(self) -> str:
        return (f"ReplayBufferEnsemble({len(self._rbs)} buffers, p={self.p}, "
                f"num_buffer_sampled={self.num_buffer_sampled}, len={len(self)})")  # fmt: skip
