"""The ``space`` objects of specs: plain containers read as ``spec.space.low`` / ``spec.space.n``."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["CategoricalBox", "ContinuousBox", "MultiCategoricalBox"]


@dataclass(frozen=True, eq=False)
class ContinuousBox:
    """Element-wise bounds ``low <= value <= high`` (tensors of the spec's shape).

    Example:
        >>> import torch
        >>> box = ContinuousBox(torch.zeros(2), torch.ones(2))
        >>> box.low, box.high
        (tensor([0., 0.]), tensor([1., 1.]))
    """

    low: torch.Tensor
    high: torch.Tensor

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ContinuousBox)
            and self.low.shape == other.low.shape
            and torch.equal(self.low, other.low.to(self.low.device))
            and torch.equal(self.high, other.high.to(self.high.device))
        )

    def __iter__(self):  # allows ``low, high = spec.space``
        yield self.low
        yield self.high


@dataclass(frozen=True)
class CategoricalBox:
    """``n`` categories ``0 .. n-1``.

    Example:
        >>> CategoricalBox(4).n
        4
    """

    n: int


@dataclass(frozen=True, eq=False)
class MultiCategoricalBox:
    """One categorical of ``nvec[i]`` categories per entry (a tuple of ints or an int tensor).

    Example:
        >>> MultiCategoricalBox((3, 2)).nvec
        (3, 2)
    """

    nvec: tuple[int, ...] | torch.Tensor
