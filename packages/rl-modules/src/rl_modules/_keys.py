"""Checks on the keys a module reads."""

from __future__ import annotations

from collections.abc import Iterable

from tensordict import TensorDictBase
from tensordict.utils import NestedKey


def check_in_keys(tensordict: TensorDictBase, keys: Iterable[NestedKey], who: str) -> None:
    """Raise a ``KeyError`` naming every missing key, what is present and the fix."""
    missing = [k for k in keys if tensordict.get(k, None) is None]
    if missing:
        present = sorted(map(str, tensordict.keys(True, True)))
        raise KeyError(
            f"{who}: input key(s) {missing} not found in the TensorDict (it holds {present}). "
            "Pass in_keys= naming the keys your data carries, or add the missing entries."
        )
