"""The replay buffer every dataset loader returns: fixed contents, TensorDict samples."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict

from rl_buffers.storages.tensor_storage import LazyTensorStorage
from rl_buffers.tensordict_replay_buffer import TensorDictReplayBuffer
from rl_buffers.writers import ImmutableDatasetWriter


class DatasetReplayBuffer(TensorDictReplayBuffer):
    """A :class:`TensorDictReplayBuffer` holding a fixed dataset of transitions.

    Args:
        data: the ``[N]`` TED transitions (see :func:`transitions_from_arrays`).
        batch_size: the default of :meth:`sample`.
        writer: default :class:`ImmutableDatasetWriter` (no writes); pass a
            ``RoundRobinWriter`` to keep adding data (online fine-tuning).
        **kwargs: as :class:`TensorDictReplayBuffer` (``sampler``, ``transform``, ``prefetch``...).

    Examples:
        >>> from tensordict import TensorDict
        >>> rb = DatasetReplayBuffer(TensorDict(obs=torch.arange(5.0), batch_size=[5]), batch_size=2)
        >>> len(rb), rb.sample()["obs"].shape
        (5, torch.Size([2]))
    """

    def __init__(self, data: TensorDict, batch_size: int | None = None, *, writer: Any = None,
                 **kwargs: Any) -> None:  # fmt: skip
        storage = kwargs.pop("storage", None)
        if storage is None:  # not `or`: an empty storage is falsy
            storage = LazyTensorStorage(data.shape[0])
        storage.set(torch.arange(data.shape[0]), data)
        super().__init__(
            storage=storage,
            writer=writer if writer is not None else ImmutableDatasetWriter(),
            batch_size=batch_size,
            **kwargs,
        )
