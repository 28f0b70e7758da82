"""Pure-torch segment-tree kernels: the reference path, bit-identical to the extension.

The tree is a flat tensor of ``2 * capacity`` entries (``capacity`` a power of
two): the root is entry 1, leaf ``i`` is entry ``capacity + i``. Each function
performs the same float operations, in the same order, as
``csrc/segment_tree_cpu.cpp`` and ``csrc/segment_tree_cuda.cu``.
"""

from __future__ import annotations

import numpy as np
import torch

SUM = 0
MIN = 1


def dedup_last(index: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keeps, for every repeated index, the value written last.

    Args:
        index: int64 indices ``[n]``.
        value: values ``[n]``.

    Returns:
        ``(unique_index, value_of_its_last_occurrence)``.

    Examples:
        >>> dedup_last(torch.tensor([2, 0, 2]), torch.tensor([1.0, 2.0, 3.0]))
        (tensor([0, 2]), tensor([2., 3.]))
    """
    if index.numel() <= 1:
        return index, value
    unique, inverse = torch.unique(index, return_inverse=True)
    if unique.numel() == index.numel() and bool((index[1:] > index[:-1]).all()):
        return index, value
    position = torch.arange(index.numel(), device=index.device)
    last = torch.full((unique.numel(),), -1, dtype=torch.long, device=index.device)
    last.scatter_reduce_(0, inverse, position, reduce="amax")
    return unique, value[last]


def _combine(a: torch.Tensor, b: torch.Tensor, op: int) -> torch.Tensor:
    return a + b if op == SUM else torch.minimum(a, b)


def update(
    tree: torch.Tensor, capacity: int, index: torch.Tensor, value: torch.Tensor, op: int
) -> None:
    """Writes leaves (last write wins) and recomputes their ancestors, in place."""
    index, value = dedup_last(index.to(device=tree.device, dtype=torch.long).reshape(-1),
                              value.to(device=tree.device, dtype=tree.dtype).reshape(-1))  # fmt: skip
    node = index + capacity
    tree[node] = value
    while capacity > 1:
        node = node >> 1
        # Repeated parents receive the same value: children are already final.
        tree[node] = _combine(tree[2 * node], tree[2 * node + 1], op)
        capacity >>= 1


def query(tree: torch.Tensor, capacity: int, start: int, end: int, op: int) -> torch.Tensor:
    """Reduces leaves ``[start, end)`` with the iterative bottom-up walk; a 0-d tensor."""
    nodes: list[int] = []
    left, right = start + capacity, end + capacity
    while left < right:
        if left & 1:
            nodes.append(left)
            left += 1
        if right & 1:
            right -= 1
            nodes.append(right)
        left >>= 1
        right >>= 1
    values = tree[torch.tensor(nodes, dtype=torch.long, device=tree.device)].cpu().numpy()
    if op == SUM:
        result = values.dtype.type(0)
        for v in values:  # sequential, in the tree's dtype: the compiled order
            result = result + v
    else:
        result = values.dtype.type(np.inf)
        for v in values:
            result = min(result, v)
    return torch.tensor(result, dtype=tree.dtype, device=tree.device)


def scan_lower_bound(tree: torch.Tensor, capacity: int, mass: torch.Tensor) -> torch.Tensor:
    """For each mass ``m``, the smallest leaf ``i`` with ``prefix_sum(i + 1) > m`` (sum trees)."""
    remaining = mass.to(device=tree.device, dtype=tree.dtype).clone()
    node = torch.ones(remaining.shape, dtype=torch.long, device=tree.device)
    width = capacity
    while width > 1:
        left = 2 * node
        left_value = tree[left]
        go_right = remaining >= left_value
        remaining = torch.where(go_right, remaining - left_value, remaining)
        node = left + go_right
        width >>= 1
    return node - capacity
