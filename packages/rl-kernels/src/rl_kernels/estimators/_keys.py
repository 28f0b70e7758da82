"""The keys an estimator reads and writes, and lookups whose errors name the fix."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

__all__ = ["MissingKeyError", "ValueEstimatorKeys", "get_entry", "next_key", "replace_keys"]


@dataclass(frozen=True)
class ValueEstimatorKeys:
    """The keys of an estimator (``reward``, ``done``, ``terminated`` are read under ``"next"``).

    The names and defaults are those of ``rl_objectives.value`` and TorchRL.

    Attributes:
        advantage: written advantage. Defaults to ``"advantage"``.
        value_target: written return target. Defaults to ``"value_target"``.
        value: the critic's output, read at the root and under ``"next"``. Defaults to ``"state_value"``.
        reward: read as ``("next", reward)``. Defaults to ``"reward"``.
        done: read as ``("next", done)``. Defaults to ``"done"``.
        terminated: read as ``("next", terminated)`` (``done`` if absent). Defaults to ``"terminated"``.
        sample_log_prob: behaviour log-probability (V-trace). Defaults to ``"action_log_prob"``.
        action: the action (V-trace). Defaults to ``"action"``.
    """

    advantage: NestedKey = "advantage"
    value_target: NestedKey = "value_target"
    value: NestedKey = "state_value"
    reward: NestedKey = "reward"
    done: NestedKey = "done"
    terminated: NestedKey = "terminated"
    sample_log_prob: NestedKey = "action_log_prob"
    action: NestedKey = "action"


class MissingKeyError(KeyError):
    """A ``KeyError`` whose message prints as written (``KeyError`` prints its repr)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def next_key(key: NestedKey) -> tuple[str, ...]:
    """``key`` under ``"next"``."""
    return ("next", *key) if isinstance(key, tuple) else ("next", key)


def _normalize(key: NestedKey) -> NestedKey:
    if isinstance(key, list):
        key = tuple(key)
    if isinstance(key, tuple) and len(key) == 1:
        return key[0]
    if not isinstance(key, (str, tuple)):
        raise TypeError(f"a key must be a str or a tuple of str, got {key!r}.")
    return key


def replace_keys(
    keys: ValueEstimatorKeys, owner: str, kwargs: dict[str, NestedKey | None]
) -> ValueEstimatorKeys:
    """A copy of ``keys`` with ``kwargs`` set (``None`` values skipped).

    Raises:
        ValueError: a name in ``kwargs`` is not a field of ``keys``.
    """
    valid = {f.name for f in fields(keys)}
    unknown = sorted(set(kwargs) - valid)
    if unknown:
        raise ValueError(
            f"{owner}.set_keys got unknown key name(s) {unknown}; valid names are {sorted(valid)}."
        )
    return replace(keys, **{k: _normalize(v) for k, v in kwargs.items() if v is not None})


def get_entry(
    tensordict: TensorDictBase, key: NestedKey, *, owner: str, key_name: str, debug: bool = False
) -> torch.Tensor:
    """Read ``key``; a miss raises a ``KeyError`` saying which ``set_keys`` name points at it."""
    value = tensordict.get(key, None)
    if value is None:
        present = sorted(str(k) for k in tensordict.keys(include_nested=True, leaves_only=True))
        raise MissingKeyError(
            f"{owner} expected the entry {key!r} (its '{key_name}' key) in the input "
            f"TensorDict, but it is missing. Present entries: {present}. Write it upstream, "
            f"or point {owner} at your entry with .set_keys({key_name}=<your key>)."
        )
    if debug and value.is_floating_point() and not bool(torch.isfinite(value).all()):
        raise ValueError(
            f"{owner} (debug=True): the entry {key!r} holds non-finite values. "
            "Check the data that produced it (rewards, network outputs)."
        )
    return value
