"""Key helpers shared by losses and estimators: lookups whose errors name the fix."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

__all__ = [
    "MissingKeyError",
    "UnknownKeyNameError",
    "check_finite",
    "get_entry",
    "normalize_key",
    "replace_keys",
]


class MissingKeyError(KeyError):
    """A ``KeyError`` whose message prints as written (``KeyError`` would print its repr)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def normalize_key(key: NestedKey) -> NestedKey:
    """Turn a 1-tuple into its string and lists into tuples, so keys compare equal."""
    if isinstance(key, list):
        key = tuple(key)
    if isinstance(key, tuple) and len(key) == 1:
        return key[0]
    if not isinstance(key, (str, tuple)):
        raise TypeError(f"a key must be a str or a tuple of str, got {key!r}.")
    return key


def get_entry(
    tensordict: TensorDictBase,
    key: NestedKey,
    *,
    owner: str,
    key_name: str,
    debug: bool = False,
) -> torch.Tensor:
    """Read ``key`` from ``tensordict``; raise a ``KeyError`` that says how to fix a miss.

    Args:
        tensordict: the input.
        key: the (possibly nested) key to read.
        owner: the name of the component reading it (for the message).
        key_name: the ``set_keys`` field that holds ``key``.
        debug: if ``True``, raise a ``ValueError`` on NaN or infinite entries.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict(reward=torch.ones(2, 1), batch_size=[2])
        >>> get_entry(td, "reward", owner="GAE", key_name="reward").shape
        torch.Size([2, 1])
    """
    value = tensordict.get(key, None)
    if value is None:
        present = sorted(str(k) for k in tensordict.keys(include_nested=True, leaves_only=True))
        raise MissingKeyError(
            f"{owner} expected the entry {key!r} (its '{key_name}' key) in the input "
            f"TensorDict, but it is missing. Present entries: {present}. Write it upstream, "
            f"or point {owner} at your entry with .set_keys({key_name}=<your key>)."
        )
    if debug:
        check_finite(value, key, owner=owner)
    return value


def check_finite(value: torch.Tensor, key: NestedKey, *, owner: str) -> None:
    """Raise a ``ValueError`` naming ``key`` if ``value`` holds NaN or infinite entries."""
    if value.is_floating_point() and not bool(torch.isfinite(value).all()):
        bad = int((~torch.isfinite(value)).sum())
        raise ValueError(
            f"{owner} (debug=True): the entry {key!r} holds {bad} non-finite value(s) "
            f"out of {value.numel()}. Check the data that produced it (rewards, network outputs)."
        )


class UnknownKeyNameError(KeyError, ValueError):
    """``set_keys`` got a name the key dataclass does not have: TorchRL's losses raise a
    ``ValueError`` for it and its estimators a ``KeyError``; this is both."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def replace_keys(keys: Any, owner: str, kwargs: dict[str, NestedKey | None]) -> Any:
    """A copy of the frozen key dataclass ``keys`` with ``kwargs`` set (``None`` values skipped).

    Raises:
        UnknownKeyNameError: a name in ``kwargs`` is not a field of ``keys`` (a ``KeyError``
            and a ``ValueError``).
    """
    valid = {f.name for f in fields(keys)}
    unknown = sorted(set(kwargs) - valid)
    if unknown:
        raise UnknownKeyNameError(
            f"{owner}.set_keys got unknown key name(s) {unknown}; valid names are {sorted(valid)}."
        )
    return replace(keys, **{k: normalize_key(v) for k, v in kwargs.items() if v is not None})
