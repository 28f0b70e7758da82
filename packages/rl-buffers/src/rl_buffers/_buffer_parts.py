"""What a replay buffer is built from, and building it (at once or on first use)."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Parts:
    """What a ``delayed_init`` buffer builds on first use."""

    storage: Any
    sampler: Any
    writer: Any
    transform: Any
    transform_factory: Any
    collate_fn: Any
    compilable: bool
    generator: torch.Generator | None


BUILT_ON_INIT = frozenset({"_storage", "_sampler", "_writer", "_transform", "_collate_fn", "_rng"})


def built_instance(part: Any) -> Any:
    """``part`` if it is already an object (not a factory), else ``None``."""
    if part is None or isinstance(part, type) or _is_factory(part):
        return None
    return part


def _is_factory(part: Any) -> bool:
    return isinstance(part, type | functools.partial) or inspect.isfunction(part)


def built(part: Any, base: type | None) -> Any:
    """Calls ``part`` if it is a factory (a class, a function, a ``partial``), else returns it."""
    if part is None:
        return None
    if _is_factory(part) and not (base is not None and isinstance(part, base)):
        return part()
    return part
