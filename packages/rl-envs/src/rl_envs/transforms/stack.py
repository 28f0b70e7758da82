"""``Stack``: several entries (tensors or sub-TensorDicts) stacked into one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, as_key_list, spec_has
from rl_envs.transforms.transform import EnvSpecs, Transform


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


class Stack(Transform):
    """Stacks ``in_keys`` along a new dim ``dim`` into ``out_key`` (``inv``: unstacks).

    Useful for agents with identical specs under different keys: their entries (whole
    sub-TensorDicts included) become one batched entry a multi-agent algorithm reads. The
    env's specs are stacked alike, actions included, and ``inv`` splits ``in_key_inv``
    back into ``out_keys_inv`` before the inner env reads them.

    Args:
        in_keys: the entries to stack (same shapes).
        out_key: the stacked entry (not one of ``in_keys``).
        in_key_inv: the entry ``inv`` unstacks (give ``out_keys_inv`` with it).
        out_keys_inv: where ``inv`` writes the pieces, in order.
        dim: the new dim; negative (counted from the end, so batch dims do not matter)
            unless ``allow_positive_dim``.
        allow_positive_dim: accept ``dim >= 0``.
        del_keys: drop the inputs (and parents left empty) after stacking.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(3), b=torch.ones(3))
        >>> Stack(["a", "b"], "ab", dim=-2)(td)["ab"]
        tensor([[0., 0., 0.],
                [1., 1., 1.]])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_key: NestedKey,
        in_key_inv: NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        dim: int = -1,
        allow_positive_dim: bool = False,
        *,
        del_keys: bool = True,
    ) -> None:
        if dim >= 0 and not allow_positive_dim:
            raise ValueError(
                "Stack: dim should be negative to accommodate for envs of different "
                "batch_sizes. If you need dim to be positive, set allow_positive_dim=True."
            )
        if (in_key_inv is None) != (out_keys_inv is None):
            given = "out_keys_inv" if in_key_inv is None else "in_key_inv"
            missing = "in_key_inv" if in_key_inv is None else "out_keys_inv"
            raise ValueError(f"Stack: {given} was specified, but {missing} was not.")
        super().__init__(in_keys=in_keys)
        self.out_keys = as_key_list(out_key)
        if in_key_inv is not None:
            self.in_keys_inv = as_key_list(in_key_inv)
            self.out_keys_inv = as_key_list(out_keys_inv)
        out = _as_tuple(self.out_keys[0])
        if any(_as_tuple(k) == out for k in self.in_keys):
            raise ValueError(f"Stack: out_key {out_key!r} cannot be in in_keys.")
        parents = {_as_tuple(k)[:i] for k in self.in_keys for i in range(1, len(_as_tuple(k)))}
        self._parents = sorted(parents, key=len, reverse=True)  # deepest first
        self.dim = dim
        self.del_keys = del_keys

    def _drop_inputs(self, data: Any) -> None:
        for key in self.in_keys:
            if _as_tuple(key) in {_as_tuple(k) for k in data.keys(True)}:
                del data[key]
        for parent in self._parents:
            if parent in {_as_tuple(k) for k in data.keys(True)} and len(data[parent].keys()) == 0:
                del data[parent]

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        values = []
        for key in self.in_keys:
            value = next_tensordict.get(key, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise KeyError(
                    f"Stack: in_key {key!r} is missing (present: "
                    f"{sorted(next_tensordict.keys(True, True), key=str)})."
                )
            values.append(value)
        if not values:
            return next_tensordict
        next_tensordict.set(self.out_keys[0], torch.stack(values, dim=self.dim))
        if self.del_keys:
            self._drop_inputs(next_tensordict)
        return next_tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.in_keys_inv:
            return tensordict
        stacked = tensordict.get(self.in_keys_inv[0], None)
        if stacked is None:
            return tensordict
        pieces = stacked.unbind(self.dim)
        if len(pieces) != len(self.out_keys_inv):
            raise ValueError(
                f"Stack.inv: {self.in_keys_inv[0]!r} holds {len(pieces)} entries along dim "
                f"{self.dim}, but out_keys_inv names {len(self.out_keys_inv)}."
            )
        for key, piece in zip(self.out_keys_inv, pieces, strict=True):
            tensordict.set(key, piece)
        return tensordict.exclude(self.in_keys_inv[0])

    def _stack_spec(self, composite: Any) -> Any:
        if not all(spec_has(composite, k) for k in self.in_keys):
            return composite  # stacked where every input is declared (e.g. not in a state spec)
        stacked = torch.stack([composite[k] for k in self.in_keys], self.dim)
        composite[self.out_keys[0]] = stacked
        if self.del_keys:
            self._drop_inputs(composite)
        return composite

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        specs.observation = self._stack_spec(specs.observation)
        specs.reward = self._stack_spec(specs.reward)
        specs.done = self._stack_spec(specs.done)
        specs.action = self._stack_spec(specs.action)
        specs.state = self._stack_spec(specs.state)
        return specs

    def extra_repr(self) -> str:
        return f"in_keys={self.in_keys}, out_key={self.out_keys[0]!r}, dim={self.dim}"
