"""Small helpers shared by the transforms: key lists, error messages, spec edits."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.specs import Bounded

NestedKey = str | tuple[str, ...]


def as_key_list(keys: NestedKey | Sequence[NestedKey] | None) -> list[NestedKey]:
    """Normalises ``None``, one key or a sequence of keys to a list of keys.

    Example:
        >>> as_key_list("obs"), as_key_list(["a", ("b", "c")]), as_key_list(None)
        (['obs'], ['a', ('b', 'c')], [])
    """
    if keys is None:
        return []
    if isinstance(keys, (str, tuple)):
        return [_unravel(keys)]
    return [_unravel(k) for k in keys]


def _flat(key: tuple) -> tuple[str, ...]:
    out: list[str] = []
    for part in key:
        if isinstance(part, tuple):
            out.extend(_flat(part))
        elif isinstance(part, str):
            out.append(part)
        else:
            raise TypeError(f"a nested key must be a tuple of strings, got {key!r}")
    return tuple(out)


def _unravel(key: NestedKey) -> NestedKey:
    if isinstance(key, tuple):
        key = _flat(key)  # ("a", ("b",)) is ("a", "b"), as tensordict's unravel_key
        return key[0] if len(key) == 1 else key
    if not isinstance(key, str):
        raise TypeError(f"a key must be a string or a tuple of strings, got {key!r}")
    return key


def present_keys(td: TensorDictBase) -> list[NestedKey]:
    """Sorted leaf keys of ``td`` (for error messages)."""
    return sorted(td.keys(include_nested=True, leaves_only=True), key=str)


def missing_key_error(
    owner: object, key: NestedKey, td: TensorDictBase, *, role: str = "in_key"
) -> KeyError:
    """A KeyError that names the transform, the missing key, what is present and the fix."""
    name = type(owner).__name__
    return KeyError(
        f"{name}: {role} {key!r} is missing from the TensorDict it received "
        f"(present: {present_keys(td)}). Pass {role}s naming entries that exist, or place "
        f"{name} after the transform that writes {key!r}."
    )


def get_or_raise(owner: object, td: TensorDictBase, key: NestedKey, *, role: str = "in_key"):
    """``td.get(key)`` with the transform's own error message when the key is absent."""
    value = td.get(key, None)
    if value is None:
        raise missing_key_error(owner, key, td, role=role)
    return value


def is_composite(spec: Any) -> bool:
    """Whether ``spec`` maps keys to specs (a Composite, duck-typed)."""
    return hasattr(spec, "keys") and hasattr(spec, "items")


def spec_has(spec: Any, key: NestedKey) -> bool:
    """Whether a Composite spec holds ``key`` (nested tuple keys allowed)."""
    if spec is None:
        return False
    return key in set(spec.keys(include_nested=True, leaves_only=False))


def cast_spec(spec: Any, dtype: torch.dtype) -> Any:
    """A copy of a leaf spec with another dtype (bounds cast for Bounded specs)."""
    if spec.dtype == dtype:
        return spec.clone()
    return spec.to(dtype)


def unbounded_like(spec: Any, shape: Iterable[int] | None = None, dtype: torch.dtype | None = None):
    """An Unbounded spec with ``spec``'s device and the given (or the same) shape and dtype."""
    from rl_envs.specs import Unbounded

    return Unbounded(
        shape=torch.Size(spec.shape if shape is None else shape),
        device=spec.device,
        dtype=spec.dtype if dtype is None else dtype,
    )


def reshaped_spec(spec: Any, fn: Any) -> Any:
    """``spec`` with its values (and bounds, for Bounded specs) mapped by a reshaping ``fn``."""
    shape = fn(torch.empty(spec.shape, device="meta")).shape
    if isinstance(spec, Bounded):
        low = fn(spec.space.low.expand(spec.shape))
        high = fn(spec.space.high.expand(spec.shape))
        return Bounded(
            low=low.clone(), high=high.clone(), shape=shape, device=spec.device, dtype=spec.dtype
        )
    return unbounded_like(spec, shape)


def reset_mask(tensordict: TensorDictBase | None) -> torch.Tensor | None:
    """The ``"_reset"`` mask of a partial reset's input (``None``: reset everything)."""
    if tensordict is None:
        return None
    return tensordict.get("_reset", None)


def masked_fill_reset(
    tensordict: TensorDictBase | None, key: NestedKey, fresh: torch.Tensor
) -> torch.Tensor:
    """``fresh`` where the entry is reset, the input's previous ``key`` elsewhere.

    ``fresh`` is returned as is for a full reset or when there is no previous value.
    """
    mask = reset_mask(tensordict)
    if mask is None:
        return fresh
    previous = tensordict.get(key, None)
    if previous is None:
        return fresh
    while mask.ndim < fresh.ndim:
        mask = mask.unsqueeze(-1)
    if mask.ndim > fresh.ndim:
        mask = mask.reshape(mask.shape[: fresh.ndim])
    return torch.where(mask, fresh, previous)


def rows_where(mask: torch.Tensor, a: TensorDictBase, b: TensorDictBase) -> TensorDictBase:
    """``a`` where ``mask`` (``[*B]`` or ``[*B, 1]``) else ``b``, entry by entry of ``b``.

    Entries ``a`` lacks, or holds in another shape, stay ``b``'s.

    Example:
        >>> from tensordict import TensorDict
        >>> a = TensorDict(x=torch.ones(2, 3), batch_size=[2])
        >>> rows_where(torch.tensor([True, False]), a, a.apply(torch.zeros_like))["x"][:, 0]
        tensor([1., 0.])
    """
    out = b.clone(False)
    nb = b.batch_dims
    for key in b.keys(True, True):
        va, vb = a.get(key, None), b.get(key)
        if va is None or va.shape != vb.shape:
            continue
        out.set(key, torch.where(mask.reshape(*mask.shape[:nb], *[1] * (vb.ndim - nb)), va, vb))
    return out
