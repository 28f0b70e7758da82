"""The sampler protocol."""

from __future__ import annotations

from typing import Any

import torch

from rl_buffers.storages.base import Storage

EMPTY_ERROR = (
    "Cannot sample from an empty storage: the replay buffer holds no data; extend it first "
    "(e.g. `rb.extend(batch)`), or check `len(rb) > 0` before sampling."
)


class Sampler:
    """Chooses which stored items a batch reads.

    ``sample(storage, batch_size)`` returns ``(index, info)``: storage indices
    and a dict of extra per-sample values (e.g. importance weights).
    """

    ran_out: bool = False
    # The generator random draws use (``None``: torch's global one); set by
    # ``ReplayBuffer(generator=...)`` / ``ReplayBuffer.set_rng`` (TorchRL's attribute name).
    _rng: torch.Generator | None = None

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        raise NotImplementedError

    def extend(self, index: torch.Tensor, storage: Storage | None = None) -> None:
        """Called after a write with the positions written."""

    def add(self, index: torch.Tensor, storage: Storage | None = None) -> None:
        self.extend(index, storage)

    def update_priority(self, index: Any, priority: Any, storage: Storage | None = None) -> None:
        raise TypeError(f"{type(self).__name__} has no priorities: use a PrioritizedSampler.")

    def annotate(self, data: Any, info: dict[str, Any]) -> Any:
        """Writes sampler-specific entries into a sampled TensorDict (slice markers)."""
        return data

    def empty(self) -> None:
        """Forgets per-item state."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restores :meth:`state_dict`."""


def check_not_empty(storage: Storage) -> int:
    n = len(storage)
    if n == 0:
        raise RuntimeError(EMPTY_ERROR)
    return n
