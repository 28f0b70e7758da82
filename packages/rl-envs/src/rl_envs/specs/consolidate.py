"""``consolidate_spec``: give every member of a lazy stack of Composites the same keys.

A :class:`~rl_envs.specs.StackedComposite` (``torch.stack`` of Composites that differ,
e.g. one per agent) lists only the keys all its members share. ``consolidate_spec``
adds to each member the keys only other members have ("exclusive" keys), as empty
specs: the members' leading dims followed by ``0`` (or ``0`` where the members that
have the key disagree), so that a stacked value holds no data for them. The stack then
has one set of keys, which ``keys()``, ``rand()`` and ``zero()`` all see.
``check_no_exclusive_keys`` tells whether a spec has none left.
"""

from __future__ import annotations

from typing import Any

import torch

from rl_envs.specs.composite import Composite
from rl_envs.specs.stacked import Stacked, StackedComposite

__all__ = ["check_no_exclusive_keys", "consolidate_spec"]


def consolidate_spec(
    spec: Any, recurse_through_entries: bool = True, recurse_through_stack: bool = True
) -> Any:
    """A copy of ``spec`` whose lazily stacked Composites have no exclusive keys.

    Args:
        spec: a spec; only ``Composite`` / ``StackedComposite`` change, others are cloned.
        recurse_through_entries: also consolidate the Composites held as entries.
        recurse_through_stack: also consolidate each member of a lazy stack first.

    Returns:
        The consolidated copy (``spec`` itself is not modified).

    Raises:
        ValueError: members hold the same exclusive key with specs of different classes.

    Example:
        >>> import torch
        >>> from rl_envs.specs import Composite, Unbounded
        >>> from rl_envs.specs.consolidate import consolidate_spec
        >>> a = Composite(obs=Unbounded(shape=(3,)), extra=Unbounded(shape=(2,)))
        >>> b = Composite(obs=Unbounded(shape=(3,)))
        >>> spec = consolidate_spec(torch.stack([a, b]))
        >>> sorted(spec.keys()), tuple(spec[1]["extra"].shape)
        (['extra', 'obs'], (0,))
    """
    spec = spec.clone()
    if isinstance(spec, StackedComposite):
        members = spec._specs
        if recurse_through_stack:
            members = [
                consolidate_spec(m, recurse_through_entries, recurse_through_stack) for m in members
            ]
        shared = set(spec.keys())
        examples: dict[str, list[Any]] = {}
        for member in members:
            for key in [k for k in member if k not in shared]:  # in order
                examples.setdefault(key, []).append(member[key])
        for member in members:
            own = set(member.keys())
            for key, values in examples.items():
                if key not in own:
                    member[key] = _empty_like(values, member.shape)
        spec = StackedComposite(*members, dim=spec.dim)
    if recurse_through_entries and isinstance(spec, Composite):
        for key in list(spec.keys()):
            value = spec[key]
            if isinstance(value, (Composite, StackedComposite)):
                spec[key] = consolidate_spec(value, recurse_through_entries, recurse_through_stack)
    return spec


def check_no_exclusive_keys(spec: Any, recurse: bool = True) -> bool:
    """Whether no lazy stack of Composites in ``spec`` has exclusive keys (TorchRL's name).

    A ``StackedComposite`` passes when all its members have the same keys; with
    ``recurse``, so must every lazy stack held inside it (its members' entries) or inside a
    ``Composite``'s entries. Any other spec passes.

    Args:
        spec: the spec to check.
        recurse: also check the nested Composites and lazy stacks.

    Example:
        >>> import torch
        >>> from rl_envs import check_no_exclusive_keys, consolidate_spec
        >>> from rl_envs.specs import Composite, Unbounded
        >>> a = Composite(obs=Unbounded(shape=(3,)), extra=Unbounded(shape=(2,)))
        >>> spec = torch.stack([a, Composite(obs=Unbounded(shape=(3,)))])
        >>> check_no_exclusive_keys(spec), check_no_exclusive_keys(consolidate_spec(spec))
        (False, True)
    """
    if isinstance(spec, StackedComposite):
        keys = set(spec.keys())
        for member in spec._specs:
            if set(member.keys()) != keys:
                return False
            if recurse and not check_no_exclusive_keys(member):
                return False
        return True
    if recurse and isinstance(spec, Composite):
        return all(check_no_exclusive_keys(value) for value in spec.values())
    return True


def _empty_like(specs: list[Any], batch: torch.Size) -> Any:
    """An entry holding no data, shaped like ``specs`` (one exclusive key's specs)."""
    first = specs[0]
    if any(type(s) is not type(first) for s in specs[1:]):
        raise ValueError(
            "consolidate_spec: an exclusive key has specs of different classes "
            f"({sorted({type(s).__name__ for s in specs})}) in the members of the lazy "
            "stack; give it one spec class in every member that has it."
        )
    if isinstance(first, Composite):
        return Composite(shape=first.shape, device=first.device)
    if isinstance(first, StackedComposite):
        return first._specs[0].__class__(shape=first._specs[0].shape, device=first.device)
    if isinstance(first, Stacked):
        return Stacked(*[_empty_like([m], batch) for m in first._specs], dim=first.dim)
    shape = list(first.shape)
    for i, dim in enumerate(shape):
        if any(s.shape[i] != dim for s in specs):
            shape[i] = 0
    if 0 not in shape:
        shape = [d if i < len(batch) else 0 for i, d in enumerate(shape)]
    return first[(0,) * first.ndim].expand(*shape) if first.ndim else first.clone()
