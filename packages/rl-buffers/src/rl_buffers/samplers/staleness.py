"""``StalenessAwareSampler``: fresher data more often, data past a staleness limit never."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rl_buffers._layout import NestedKey, as_tuple
from rl_buffers.samplers.base import Sampler, check_not_empty
from rl_buffers.storages.base import Storage


def inverse_staleness(staleness: torch.Tensor) -> torch.Tensor:
    """The default weight ``1 / (staleness + 1)``.

    Examples:
        >>> inverse_staleness(torch.tensor([0, 1, 3])).tolist()
        [1.0, 0.5, 0.25]
    """
    return 1.0 / (staleness.float() + 1.0)


class StalenessAwareSampler(Sampler):
    """Samples stored items with weight ``fn(consumer_version - policy_version)``.

    For asynchronous training, where stored data comes from older policies:
    each item's staleness is the learner's :attr:`consumer_version` minus the
    version stored under ``version_key``. Items staler than ``max_staleness`` are
    never drawn; the others with probability proportional to
    ``staleness_weight_fn(staleness)`` (default ``1 / (staleness + 1)``), with
    replacement. ``info["staleness"]`` holds the drawn items' staleness. Move
    :attr:`consumer_version` on as the learner updates (:meth:`increment_consumer_version`).

    Args:
        max_staleness: the hard limit; ``-1``: none.
        staleness_weight_fn: staleness (tensor) -> non-negative weight (tensor).
        version_key: the stored entry holding the version that produced each item.

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage
        >>> storage = LazyTensorStorage(4)
        >>> storage.set(slice(0, 4), TensorDict(policy_version=torch.tensor([0.0, 0.0, 4.0, 5.0]), batch_size=[4]))
        >>> sampler = StalenessAwareSampler(max_staleness=2)
        >>> sampler.consumer_version = 5
        >>> index, info = sampler.sample(storage, 8)
        >>> sorted(set(index.tolist())) <= [2, 3], bool((info["staleness"] <= 1).all())
        (True, True)
    """

    def __init__(
        self,
        max_staleness: int = -1,
        staleness_weight_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
        version_key: NestedKey = "policy_version",
    ) -> None:
        self.max_staleness = max_staleness
        self.staleness_weight_fn = staleness_weight_fn or inverse_staleness
        self.version_key = as_tuple(version_key)
        self.consumer_version = 0

    def increment_consumer_version(self) -> None:
        """Moves :attr:`consumer_version` on by one (after a learner update)."""
        self.consumer_version += 1

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        check_not_empty(storage)
        if not (hasattr(storage, "has_key") and storage.has_key(self.version_key)):
            raise KeyError(
                f"StalenessAwareSampler needs the stored entry {self.version_key!r} (the policy "
                "version of each item, e.g. written by the PolicyVersion transform); pass "
                "version_key= naming the entry that holds it."
            )
        version = storage.get_leaf(self.version_key).reshape(len(storage), -1)[:, 0].cpu()
        staleness = self.consumer_version - version
        weight = self.staleness_weight_fn(staleness).float()
        if self.max_staleness >= 0:
            weight = weight.masked_fill(staleness > self.max_staleness, 0.0)
        if not bool((weight > 0).any()):
            raise RuntimeError(
                f"every stored item is staler than max_staleness={self.max_staleness} "
                f"(consumer_version={self.consumer_version}, newest stored version "
                f"{float(version.max())}): collect fresh data, or raise max_staleness."
            )
        flat = torch.multinomial(weight, batch_size, replacement=True, generator=self._rng)
        return storage.unravel(flat), {"staleness": staleness[flat]}

    def state_dict(self) -> dict:
        return {"consumer_version": self.consumer_version, "max_staleness": self.max_staleness}

    def load_state_dict(self, state: dict) -> None:
        self.consumer_version = state["consumer_version"]
        self.max_staleness = state["max_staleness"]
