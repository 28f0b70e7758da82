"""``CatTensors``: concatenates several entries into one."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, as_key_list, spec_has
from rl_envs.transforms.transform import EnvSpecs, Transform


class CatTensors(Transform):
    """Concatenates ``in_keys`` along ``dim`` into ``out_key`` (e.g. DMC observation dicts).

    Args:
        in_keys: the entries (sorted by name first when ``sort``); ``None``: every
            one-dimensional observation of the env, read when the transform joins it.
        out_key: the destination.
        dim: the concatenation dim (negative: a feature dim).
        del_keys: drop the inputs afterwards.
        unsqueeze_if_oor: unsqueeze entries that lack ``dim`` (e.g. scalars ``[*B]``).
        sort: sort ``in_keys`` so the layout does not depend on their order.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(b=torch.ones(2), a=torch.zeros(1))
        >>> CatTensors(["b", "a"], "obs")(td)["obs"]
        tensor([0., 1., 1.])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_key: NestedKey = "observation_vector",
        dim: int = -1,
        *,
        del_keys: bool = True,
        unsqueeze_if_oor: bool = False,
        sort: bool = True,
    ) -> None:
        keys = as_key_list(in_keys)
        self._lazy = not keys
        if self._lazy and dim != -1:
            raise ValueError("CatTensors: without in_keys (read from the env) dim must be -1.")
        if sort:
            keys = sorted(keys, key=lambda k: k if isinstance(k, str) else ".".join(k))
        if dim >= 0:
            raise ValueError(f"CatTensors: dim must be negative (a feature dim), got {dim}.")
        super().__init__(keys)
        self.out_keys = [out_key]  # many inputs, one output
        self.out_key = out_key
        self.dim = dim
        self.del_keys = del_keys
        self.unsqueeze_if_oor = unsqueeze_if_oor

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self._lazy:
            raise RuntimeError(
                "CatTensors() without in_keys takes them from its env's observation spec: put "
                "it in a TransformedEnv first, or pass in_keys."
            )
        values = []
        for key in self.in_keys:
            value = next_tensordict.get(key, None)
            if value is None:
                if self._missing_tolerance:
                    return next_tensordict
                raise KeyError(
                    f"CatTensors: in_key {key!r} is missing (present: "
                    f"{sorted(next_tensordict.keys(True, True), key=str)}). Every in_key must be present."
                )
            if self.unsqueeze_if_oor and value.ndim - next_tensordict.batch_dims < -self.dim:
                value = value.unsqueeze(self.dim)
            values.append(value)
        next_tensordict.set(self.out_key, torch.cat(values, dim=self.dim))
        if self.del_keys:
            next_tensordict = next_tensordict.exclude(
                *[k for k in self.in_keys if k != self.out_key]
            )
        return next_tensordict

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        from rl_envs.transforms._utils import unbounded_like

        obs = specs.observation
        if self._lazy:  # every one-dimensional observation (TorchRL's default)
            keys = [k for k, v in obs.items(True, True) if len(v.shape) == obs.ndim + 1]
            self.in_keys = sorted(keys, key=lambda k: k if isinstance(k, str) else ".".join(k))
            self._lazy = False
        shapes = []
        for key in self.in_keys:
            if not spec_has(obs, key):
                raise KeyError(
                    f"CatTensors: in_key {key!r} is not in the observation spec "
                    f"(keys: {list(obs.keys(True, True))})."
                )
            shape = list(obs[key].shape)
            if self.unsqueeze_if_oor and len(shape) - obs.ndim < -self.dim:
                shape.insert(len(shape) + self.dim + 1, 1)
            shapes.append(shape)
        out_shape = list(shapes[0])
        out_shape[self.dim] = sum(s[self.dim] for s in shapes)
        first: Any = obs[self.in_keys[0]]
        dtype = functools.reduce(torch.promote_types, [obs[k].dtype for k in self.in_keys])
        if self.del_keys:
            for key in self.in_keys:
                if key != self.out_key:
                    del obs[key]
        obs[self.out_key] = unbounded_like(first, out_shape, dtype)
        return specs
