"""Small helpers over pytrees of stored data (TorchRL's ``replay_buffers.utils`` names)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch.utils._pytree as pytree


def tree_iter(tree: Any) -> Iterator[Any]:
    """Yields the leaves of a pytree (nested lists, tuples, dicts; tensors are leaves).

    Examples:
        >>> import torch
        >>> [leaf.tolist() for leaf in tree_iter({"a": torch.zeros(1), "b": [torch.ones(2)]})]
        [[0.0], [1.0, 1.0]]
    """
    yield from pytree.tree_leaves(tree)
