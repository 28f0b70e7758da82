"""``ConsumingSampler``: each stored item is sampled at most ``n`` times, then its slot is freed."""

from __future__ import annotations

from typing import Any

import torch

from rl_buffers.samplers.base import EMPTY_ERROR, Sampler
from rl_buffers.storages.base import Storage


class ConsumingSampler(Sampler):
    """Draws live items uniformly without replacement; an item sampled ``n`` times is consumed.

    A consumed item no longer counts in ``len(rb)``, is never drawn again, and its
    slot is reused by the next writes before the writer's cursor moves on. A batch
    holds ``min(batch_size, live items)`` items; sampling with no live item raises.
    ``ran_out`` turns True when the last live item is consumed, so iterating over the
    buffer stops there. Used by ``ReplayBuffer(consume_after_n_samples=n)``; 1-d
    storages only.

    Args:
        consume_after_n_samples: draws after which an item is consumed (>= 1).

    Examples:
        >>> from rl_buffers import ListStorage, ReplayBuffer
        >>> rb = ReplayBuffer(storage=ListStorage(5), sampler=ConsumingSampler(), batch_size=3)
        >>> _ = rb.extend([torch.tensor(i) for i in range(5)])
        >>> len(rb.sample()), len(rb), len(rb.sample()), len(rb)
        (3, 2, 2, 0)
    """

    def __init__(self, consume_after_n_samples: int = 1) -> None:
        if consume_after_n_samples < 1:
            raise ValueError(
                f"consume_after_n_samples must be >= 1, got {consume_after_n_samples}."
            )
        self.consume_after_n_samples = int(consume_after_n_samples)
        self._sample_count: torch.Tensor | None = None
        self._live_mask: torch.Tensor | None = None
        self._free_indices: torch.Tensor | None = None
        self.ran_out = False

    def _ensure(self, capacity: int) -> None:
        if self._live_mask is None or self._live_mask.numel() < capacity:
            old = 0 if self._live_mask is None else self._live_mask.numel()
            live = torch.ones(capacity, dtype=torch.bool)
            count = torch.zeros(capacity, dtype=torch.long)
            if old:
                live[:old], count[:old] = self._live_mask, self._sample_count
            self._live_mask, self._sample_count = live, count
            if self._free_indices is None:
                self._free_indices = torch.zeros(0, dtype=torch.long)

    @staticmethod
    def _check_storage(storage: Storage) -> None:
        if storage.ndim != 1:
            raise ValueError(
                "ConsumingSampler (consume_after_n_samples) works with 1-dimensional storages only; "
                f"got ndim={storage.ndim}: flatten [envs, time] batches first."
            )

    def live_count(self, storage: Storage) -> int:
        """The number of stored items not consumed yet."""
        stored = len(storage)
        if self._live_mask is None:
            return stored
        return int(self._live_mask[:stored].sum())

    def take_free(self, n: int) -> torch.Tensor:
        """Up to ``n`` consumed slots to write into (oldest freed first); removed from the pool."""
        if self._free_indices is None or not self._free_indices.numel():
            return torch.zeros(0, dtype=torch.long)
        taken, self._free_indices = self._free_indices[:n], self._free_indices[n:]
        return taken

    def _append_free_indices(self, index: torch.Tensor) -> None:
        self._free_indices = torch.cat([self._free_indices, index.reshape(-1).cpu()])

    def extend(self, index: torch.Tensor, storage: Storage | None = None) -> None:
        if storage is not None:
            self._check_storage(storage)
            self._ensure(storage.max_size)
        if self._live_mask is None:
            return
        index = torch.as_tensor(index).reshape(-1).cpu()
        self._live_mask[index] = True
        self._sample_count[index] = 0
        if self._free_indices.numel():  # overwritten slots are live again
            self._free_indices = self._free_indices[~torch.isin(self._free_indices, index)]
        self.ran_out = False

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        self._check_storage(storage)
        self._ensure(storage.max_size)
        live = self._live_mask[: len(storage)].nonzero().squeeze(-1)
        if not live.numel():
            raise RuntimeError(EMPTY_ERROR)
        chosen = live[torch.randperm(live.numel(), generator=self._rng)[:batch_size]]
        self._sample_count[chosen] += 1
        done = chosen[self._sample_count[chosen] >= self.consume_after_n_samples]
        if done.numel():
            self._live_mask[done] = False
            self._append_free_indices(done)
        self.ran_out = not bool(self._live_mask[: len(storage)].any())
        return chosen, {}

    def empty(self) -> None:
        self._sample_count = self._live_mask = self._free_indices = None
        self.ran_out = False

    def state_dict(self) -> dict:
        clone = lambda t: None if t is None else t.clone()  # noqa: E731
        return {"_sample_count": clone(self._sample_count), "_live_mask": clone(self._live_mask),
                "_free_indices": clone(self._free_indices), "ran_out": self.ran_out}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        clone = lambda t: None if t is None else t.clone()  # noqa: E731
        self._sample_count = clone(state["_sample_count"])
        self._live_mask = clone(state["_live_mask"])
        self._free_indices = clone(state["_free_indices"])
        self.ran_out = bool(state.get("ran_out", False))
