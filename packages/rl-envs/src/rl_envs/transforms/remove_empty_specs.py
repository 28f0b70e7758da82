"""``RemoveEmptySpecs``: drops empty nested entries from an env's specs and data."""

from __future__ import annotations

from typing import Any

from tensordict import TensorDictBase

from rl_envs.transforms.transform import EnvSpecs, Transform


def _prune(composite: Any) -> bool:
    """Deletes the empty nested Composites of ``composite`` (deepest first); True if any went."""
    removed = False
    keys = sorted(
        (k for k, v in composite.items(True) if hasattr(v, "is_empty") and v.is_empty()),
        key=lambda k: len(k) if isinstance(k, tuple) else 1,
        reverse=True,
    )
    for key in keys:
        if key in composite:
            del composite[key]
            removed = True
    return removed


def _drop_empty(td: TensorDictBase) -> TensorDictBase:
    for key in sorted(
        td.keys(True), key=lambda k: len(k) if isinstance(k, tuple) else 1, reverse=True
    ):
        value = td.get(key, None)
        if isinstance(value, TensorDictBase) and value.is_empty():
            del td[key]
    return td


class RemoveEmptySpecs(Transform):
    """Removes empty nested Composites from the specs, and empty sub-TensorDicts from the data.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(1), other=TensorDict(inner=TensorDict()))
        >>> sorted(RemoveEmptySpecs()(td).keys())
        ['a']
    """

    def __init__(self) -> None:
        super().__init__()
        self._has_empty_input = True

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return _drop_empty(next_tensordict)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return _drop_empty(tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return _drop_empty(tensordict_reset)

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        for name in ("observation", "reward", "done"):
            _prune(getattr(specs, name))
        removed_action = _prune(specs.action)
        removed_state = _prune(specs.state)
        self._has_empty_input = removed_action or removed_state
        return specs
