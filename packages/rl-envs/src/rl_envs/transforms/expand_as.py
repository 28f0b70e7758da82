"""``ExpandAs``: expands an entry to the right to the shape of a reference entry."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, as_key_list, spec_has
from rl_envs.transforms.transform import EnvSpecs, Transform


def _expand_right(value: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    while value.dim() < len(shape):
        value = value.unsqueeze(-1)
    return value.expand(shape)


class ExpandAs(Transform):
    """Writes ``in_key`` expanded to ``ref_key``'s shape (trailing singleton dims added).

    E.g. an env-level ``done`` ``[*B, 1]`` broadcast to each agent's ``[*B, n_agents, 1]``
    reward layout. The out entry joins the spec category of ``in_key`` (the observation
    spec when a done flag is written under a new name).

    Args:
        in_key: the entry to expand.
        ref_key: the entry whose shape it takes.
        out_key: where the result goes (default: ``in_key``, in place).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(done=torch.tensor([[True], [False]]), obs=torch.zeros(2, 3, 4))
        >>> ExpandAs("done", "obs", "done_obs")(td)["done_obs"].shape
        torch.Size([2, 3, 4])
    """

    def __init__(self, in_key: NestedKey, ref_key: NestedKey, out_key: NestedKey | None = None):
        super().__init__(in_keys=[in_key], out_keys=[in_key if out_key is None else out_key])
        self.in_key = self.in_keys[0]
        self.out_key = self.out_keys[0]
        self.ref_key = as_key_list(ref_key)[0]

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        ref = next_tensordict.get(self.ref_key, None)
        value = next_tensordict.get(self.in_key, None)
        for key, got in ((self.ref_key, ref), (self.in_key, value)):
            if got is None:
                if self._missing_tolerance:
                    return next_tensordict
                raise KeyError(
                    f"ExpandAs: {key!r} is missing (present: "
                    f"{sorted(next_tensordict.keys(True, True), key=str)})."
                )
        next_tensordict.set(self.out_key, _expand_right(value, ref.shape))
        return next_tensordict

    def _ref_shape(self) -> torch.Size | None:
        parent = self.parent
        if parent is None:
            return None
        for spec in (parent.full_observation_spec, parent.full_reward_spec, parent.full_done_spec):
            if spec_has(spec, self.ref_key):
                return spec[self.ref_key].shape
        return None

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        value = tensordict_reset.get(self.in_key, None)
        if value is None:
            return tensordict_reset
        ref = tensordict_reset.get(self.ref_key, None)
        shape = ref.shape if ref is not None else self._ref_shape()
        tensordict_reset.set(self.out_key, value if shape is None else _expand_right(value, shape))
        return tensordict_reset

    def _find(self, specs: EnvSpecs, key: NestedKey) -> tuple[str, Any]:
        for name in ("observation", "reward", "done"):
            composite = getattr(specs, name)
            if spec_has(composite, key):
                return name, composite[key]
        raise KeyError(f"ExpandAs: {key!r} is not in the env's observation, reward or done specs.")

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        _, ref = self._find(specs, self.ref_key)
        name, spec = self._find(specs, self.in_key)
        if name == "done" and self.out_key != self.in_key:
            name = "observation"
        while len(spec.shape) < len(ref.shape):
            spec = spec.unsqueeze(-1)
        getattr(specs, name)[self.out_key] = spec.expand(ref.shape)
        return specs

    def extra_repr(self) -> str:
        return f"in_key={self.in_key!r}, ref_key={self.ref_key!r}, out_key={self.out_key!r}"
