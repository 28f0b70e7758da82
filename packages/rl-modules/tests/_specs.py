"""Tiny duck-typed spec-like objects (docs/contract.md section 6) for the tests."""

from __future__ import annotations

from types import SimpleNamespace

import torch


class BoxSpec:
    """A bounded continuous spec: shape, dtype, device, space.low/high, rand, is_in, project."""

    def __init__(self, low: torch.Tensor, high: torch.Tensor) -> None:
        self.shape = low.shape
        self.dtype = low.dtype
        self.device = low.device
        self.space = SimpleNamespace(low=low, high=high)

    def rand(self, shape=()) -> torch.Tensor:
        u = torch.rand(*shape, *self.shape)
        return self.space.low + u * (self.space.high - self.space.low)

    def is_in(self, value: torch.Tensor) -> bool:
        return bool(((value >= self.space.low) & (value <= self.space.high)).all())

    def project(self, value: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(value, self.space.high), self.space.low)


class Categorical:
    """A categorical action spec (index actions)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.shape = torch.Size([])
        self.dtype = torch.long
        self.space = SimpleNamespace(n=n)

    def rand(self, shape=()) -> torch.Tensor:
        return torch.randint(0, self.n, tuple(shape))


class OneHot:
    """A one-hot action spec."""

    def __init__(self, n: int, dtype: torch.dtype = torch.long) -> None:
        self.n = n
        self.shape = torch.Size([n])
        self.dtype = dtype
        self.space = SimpleNamespace(n=n)

    def rand(self, shape=()) -> torch.Tensor:
        idx = torch.randint(0, self.n, tuple(shape))
        return torch.nn.functional.one_hot(idx, self.n).to(self.dtype)


class ShapeOnly:
    """A spec-like object offering only a shape (lacks what most modules need)."""

    shape = torch.Size([2])


class Composite(dict):
    """A minimal Composite: a dict of specs with ``keys(include_nested, leaves_only)`` and ``rand()``."""

    def keys(self, include_nested: bool = False, leaves_only: bool = False):
        return list(super().keys())

    def rand(self, shape=()):
        from tensordict import TensorDict

        return TensorDict({k: v.rand(shape) for k, v in self.items()}, batch_size=list(shape))
