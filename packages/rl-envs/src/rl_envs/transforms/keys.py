"""Key plumbing: ``ExcludeTransform``, ``SelectTransform``, ``RenameTransform``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, as_key_list, missing_key_error, spec_has
from rl_envs.transforms.transform import EnvSpecs, Transform


def _drop(composite: Any, keys: list[NestedKey]) -> Any:
    for key in keys:
        if spec_has(composite, key):
            del composite[key]
    return composite


class ExcludeTransform(Transform):
    """Removes entries from the env's outputs (or, with ``inverse=True``, from its inputs).

    Args:
        *excluded_keys: the keys to drop.
        inverse: drop them from inputs (before the inner env reads them) instead.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> sorted(ExcludeTransform("b")(TensorDict(a=torch.zeros(1), b=torch.zeros(1))).keys())
        ['a']
    """

    def __init__(self, *excluded_keys: NestedKey, inverse: bool = False) -> None:
        if len(excluded_keys) == 1 and isinstance(excluded_keys[0], list):
            excluded_keys = tuple(excluded_keys[0])
        super().__init__()
        self.excluded_keys = as_key_list(list(excluded_keys))
        self.inverse = inverse

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self.inverse:
            return next_tensordict
        return next_tensordict.exclude(*self.excluded_keys)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return tensordict.exclude(*self.excluded_keys)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.inverse:
            return tensordict.exclude(*self.excluded_keys)
        return tensordict

    def _has_inverse(self) -> bool:
        return self.inverse

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        if self.inverse:
            specs.state = _drop(specs.state, self.excluded_keys)
        else:
            specs.observation = _drop(specs.observation, self.excluded_keys)
            specs.reward = _drop(specs.reward, self.excluded_keys)
        return specs


class SelectTransform(Transform):
    """Keeps only the selected entries of the outputs (plus rewards and done flags).

    Args:
        *selected_keys: the keys to keep.
        keep_rewards: also keep the reward entries.
        keep_dones: also keep the done flags.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(1), b=torch.zeros(1), reward=torch.zeros(1))
        >>> sorted(SelectTransform("a")(td).keys())
        ['a', 'reward']
    """

    def __init__(
        self, *selected_keys: NestedKey, keep_rewards: bool = True, keep_dones: bool = True
    ) -> None:
        if len(selected_keys) == 1 and isinstance(selected_keys[0], list):
            selected_keys = tuple(selected_keys[0])
        super().__init__()
        self.selected_keys = as_key_list(list(selected_keys))
        self.keep_rewards = keep_rewards
        self.keep_dones = keep_dones
        self._reward_keys: list[NestedKey] = ["reward"]
        self._done_keys: list[NestedKey] = ["done", "terminated", "truncated"]

    def _kept(self) -> list[NestedKey]:
        keys = list(self.selected_keys)
        if self.keep_rewards:
            keys += self._reward_keys
        if self.keep_dones:
            keys += self._done_keys
        return keys

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict.select(*self._kept(), strict=False)

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        self._reward_keys = list(specs.reward.keys(True, True))
        self._done_keys = list(specs.done.keys(True, True))
        keep = set(self.selected_keys)
        specs.observation = _drop(
            specs.observation, [k for k in specs.observation.keys(True, True) if k not in keep]
        )
        if not self.keep_rewards:
            specs.reward = _drop(specs.reward, [k for k in self._reward_keys if k not in keep])
        return specs


class RenameTransform(Transform):
    """Renames output entries ``in_keys -> out_keys`` and inputs ``out_keys_inv -> in_keys_inv``.

    Args:
        in_keys: output entries to rename.
        out_keys: their new names.
        in_keys_inv: the inner env's names of renamed inputs.
        out_keys_inv: the names the outside world writes (default ``in_keys_inv``).
        create_copy: keep the old entries too.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> sorted(RenameTransform(["a"], ["b"])(TensorDict(a=torch.zeros(1))).keys())
        ['b']
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey],
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        create_copy: bool = False,
    ) -> None:
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.create_copy = create_copy

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            value = next_tensordict.get(in_key, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise missing_key_error(self, in_key, next_tensordict)
            next_tensordict.set(out_key, value)
            if not self.create_copy:
                del next_tensordict[in_key]
        return next_tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv, strict=True):
            value = tensordict.get(out_key, None)
            if value is None:
                raise missing_key_error(self, out_key, tensordict, role="out_key_inv")
            tensordict.set(in_key, value)
            if not self.create_copy and in_key != out_key:
                del tensordict[out_key]
        return tensordict

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        for name in ("observation", "reward", "done"):
            composite = getattr(specs, name)
            for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
                if spec_has(composite, in_key):
                    composite[out_key] = composite[in_key].clone()
                    if not self.create_copy:
                        del composite[in_key]
        specs.action = self._map_specs_inv(specs.action)
        specs.state = self._map_specs_inv(specs.state)
        return specs
