"""Uniform samplers: with and without replacement."""

from __future__ import annotations

from typing import Any

import torch

from rl_buffers.samplers.base import Sampler, check_not_empty
from rl_buffers.storages.base import Storage


class RandomSampler(Sampler):
    """Uniform sampling with replacement.

    Args:
        generator: the draws' generator (``None``: torch's global one).
        replacement: ``False`` builds a :class:`SamplerWithoutReplacement` instead
            (TorchRL's spelling); the other keywords go to it.

    Examples:
        >>> from rl_buffers import LazyTensorStorage
        >>> storage = LazyTensorStorage(10)
        >>> storage.set(slice(0, 4), torch.arange(4.0))
        >>> index, info = RandomSampler().sample(storage, 3)
        >>> index.shape
        torch.Size([3])
        >>> type(RandomSampler(replacement=False, shuffle=False)).__name__
        'SamplerWithoutReplacement'
    """

    def __new__(cls, *args: Any, replacement: bool = True, **kwargs: Any) -> Any:
        if not replacement and cls is RandomSampler:
            return SamplerWithoutReplacement(*args, **kwargs)
        return super().__new__(cls)

    def __init__(
        self, generator: torch.Generator | None = None, *, replacement: bool = True
    ) -> None:
        if not replacement:
            raise TypeError(f"{type(self).__name__} has no without-replacement variant.")
        self._rng = generator

    @property
    def generator(self) -> torch.Generator | None:
        """The generator of the draws (``None``: torch's global one)."""
        return self._rng

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        n = check_not_empty(storage)
        flat = torch.randint(n, (batch_size,), generator=self._rng)
        return storage.unravel(flat), {}


class SamplerWithoutReplacement(Sampler):
    """Each stored item once per epoch, in a random (or storage) order.

    An epoch is a permutation of ``[0, len(storage))``, consumed ``batch_size``
    items at a time. The last batch of an epoch is smaller unless
    ``drop_last=True`` (then it is dropped). ``ran_out`` is ``True`` right after
    the last batch of an epoch; a new epoch starts at the next call, and when
    the storage length changed.

    Args:
        drop_last: drop the incomplete last batch of each epoch.
        shuffle: random order (``False``: storage order).
        replacement: accepted for TorchRL's ``RandomSampler(replacement=False)``
            spelling; must be ``False``.

    Examples:
        >>> from rl_buffers import LazyTensorStorage
        >>> storage = LazyTensorStorage(10)
        >>> storage.set(slice(0, 5), torch.arange(5.0))
        >>> sampler = SamplerWithoutReplacement(shuffle=False)
        >>> [sampler.sample(storage, 2)[0].tolist() for _ in range(3)]
        [[0, 1], [2, 3], [4]]
        >>> sampler.ran_out
        True
    """

    def __init__(
        self, drop_last: bool = False, shuffle: bool = True, *, replacement: bool = False
    ) -> None:
        if replacement:
            raise ValueError(
                "SamplerWithoutReplacement(replacement=True) contradicts itself: use RandomSampler()."
            )
        self.drop_last = drop_last
        self.shuffle = shuffle
        self._perm: torch.Tensor | None = None
        self._pos = 0
        self._len = -1
        self.ran_out = False

    def _new_epoch(self, n: int) -> None:
        self._perm = torch.randperm(n, generator=self._rng) if self.shuffle else torch.arange(n)
        self._pos = 0
        self._len = n
        self.ran_out = False

    @property
    def _sample_list(self) -> torch.Tensor | None:
        """What the current epoch has left to give (TorchRL's attribute); ``None`` when the
        next call starts a new epoch."""
        if self._perm is None or self.ran_out or self._pos >= self._len:
            return None
        return self._perm[self._pos :]

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        n = check_not_empty(storage)
        if self.drop_last and batch_size > n:
            raise ValueError(
                f"The batch size {batch_size} is greater than the storage capacity ({n} stored "
                "items): with drop_last=True no full batch exists; lower the batch size."
            )
        if self._perm is None or n != self._len or self.ran_out or self._pos >= n:
            self._new_epoch(n)
        end = min(self._pos + batch_size, n)
        flat = self._perm[self._pos : end]
        self._pos = end
        remaining = n - self._pos
        if remaining == 0 or (self.drop_last and remaining < batch_size):
            self.ran_out = True
        return storage.unravel(flat), {}

    def empty(self) -> None:
        self._perm, self._pos, self._len, self.ran_out = None, 0, -1, False

    def state_dict(self) -> dict:
        return {"perm": self._perm, "pos": self._pos, "len": self._len, "ran_out": self.ran_out}

    def load_state_dict(self, state: dict) -> None:
        self._perm, self._pos, self._len, self.ran_out = (
            state["perm"],
            state["pos"],
            state["len"],
            state["ran_out"],
        )
