"""``LazyStackStorage``: TensorDicts of different shapes, read back as one lazy stack."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import LazyStackedTensorDict, lazy_stack

from rl_buffers.storages.list_storage import ListStorage


class LazyStackStorage(ListStorage):
    """Keeps TensorDicts as they come (ragged shapes, strings); reads give a lazy stack.

    A :class:`ListStorage` whose reads return ``lazy_stack(items, stack_dim)``
    instead of a list, so a buffer over it samples a
    :class:`~tensordict.LazyStackedTensorDict` (``.densify(layout=torch.jagged)``
    makes nested tensors of it). The buffer uses no collate function.

    Args:
        max_size: the capacity. Default: ``1000``.
        device: unused, kept for TorchRL compatibility.
        stack_dim: the dim the items are stacked along. Default: ``0``.

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import ReplayBuffer
        >>> rb = ReplayBuffer(storage=LazyStackStorage(10))
        >>> rb.add(TensorDict(a=torch.zeros(2)))
        0
        >>> rb.add(TensorDict(a=torch.zeros(3)))
        1
        >>> sample = rb[:]
        >>> type(sample).__name__, [item["a"].shape[0] for item in sample.unbind(0)]
        ('LazyStackedTensorDict', [2, 3])
    """

    stacks_items = True  # reads are already a batch: the buffer adds no collate function

    def __init__(
        self,
        max_size: int | None = None,
        *,
        device: torch.device | str | None = None,
        stack_dim: int = 0,
        compilable: bool = False,
    ) -> None:
        super().__init__(max_size, device=device, compilable=compilable)
        self.stack_dim = stack_dim

    def get(self, index: torch.Tensor) -> LazyStackedTensorDict:
        items = super().get(index)
        if not items:
            raise RuntimeError("LazyStackStorage: nothing to stack (empty index).")
        return lazy_stack(items, dim=self.stack_dim)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, int):
            return self._items[item]
        return self.get(torch.arange(len(self))[item])
