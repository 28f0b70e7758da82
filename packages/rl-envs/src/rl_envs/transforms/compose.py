"""``Compose``: a chain of transforms applied in order (inverse in reverse order)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.callable import as_transform
from rl_envs.transforms.transform import EnvSpecs, Transform


class Compose(Transform):
    """Applies transforms one after the other.

    Outputs (reset, step, ``forward``) go through the transforms first to last;
    inputs (``inv``) go last to first, so each transform sees the data of its
    own level of the stack. Indexing, ``append``, ``insert`` and ``pop`` edit
    the chain (and invalidate the enclosing env's cached specs).

    Args:
        *transforms: the transforms, in application order.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_envs import Compose, RewardScaling, SignTransform
        >>> t = Compose(RewardScaling(loc=-1.0, scale=2.0), SignTransform(in_keys=["reward"]))
        >>> t(TensorDict(reward=torch.tensor([0.2, 0.8])))["reward"]
        tensor([-1.,  1.])
    """

    def __init__(self, *transforms: Transform) -> None:
        super().__init__()
        if len(transforms) == 1 and isinstance(transforms[0], (list, tuple)):
            transforms = tuple(transforms[0])
        transforms = tuple(as_transform(t) for t in transforms)
        self.transforms = nn.ModuleList(transforms)
        for t in transforms:
            t.set_container(self)

    # ------------------------------------------------------------------ data
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            next_tensordict = t._call(next_tensordict)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            tensordict = t(tensordict)
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            next_tensordict = t.step(tensordict, next_tensordict)
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for t in self.transforms:
            tensordict_reset = t.reset(tensordict, tensordict_reset)
        return tensordict_reset

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        for t in reversed(self.transforms):
            tensordict = t._reset_env_preprocess(tensordict)
        return tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for t in reversed(self.transforms):
            tensordict = t._inv_call(tensordict)
        return tensordict

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        for t in reversed(self.transforms):
            tensordict = t.inv(tensordict)
        return tensordict

    def _supports_rollout_map(self) -> bool:
        return all(t._supports_rollout_map() for t in self.transforms)

    def _rollout_map(self, trajectory: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            trajectory = t._rollout_map(trajectory)
        return trajectory

    def _chain(self, hook: str, spec: Any) -> Any:
        for t in self.transforms:
            spec = getattr(t, hook)(spec)
        return spec

    def transform_observation_spec(self, observation_spec: Any) -> Any:
        return self._chain("transform_observation_spec", observation_spec)

    def transform_reward_spec(self, reward_spec: Any) -> Any:
        return self._chain("transform_reward_spec", reward_spec)

    def transform_done_spec(self, done_spec: Any) -> Any:
        return self._chain("transform_done_spec", done_spec)

    def transform_action_spec(self, action_spec: Any) -> Any:
        return self._chain("transform_action_spec", action_spec)

    def transform_state_spec(self, state_spec: Any) -> Any:
        return self._chain("transform_state_spec", state_spec)

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        for t in self.transforms:
            specs = t.transform_specs(specs)
        return specs

    def transform_env_batch_size(self, batch_size: torch.Size) -> torch.Size:
        for t in self.transforms:
            batch_size = t.transform_env_batch_size(batch_size)
        return batch_size

    def _stacked_action_dims(self, action_keys: list[NestedKey]) -> dict[NestedKey, int]:
        out: dict[NestedKey, int] = {}
        for t in self.transforms:
            out.update(t._stacked_action_dims(action_keys))
        return out

    def transform_env_device(self, device: torch.device | None) -> torch.device | None:
        for t in self.transforms:
            device = t.transform_env_device(device)
        return device

    def _post_step_mdp_hooks(
        self, tensordict: TensorDictBase, next_root: TensorDictBase | None
    ) -> tuple[TensorDictBase, TensorDictBase | None]:
        for t in self.transforms:
            tensordict, next_root = t._post_step_mdp_hooks(tensordict, next_root)
        return tensordict, next_root

    def _has_post_step_mdp_hook(self) -> bool:
        return any(t._has_post_step_mdp_hook() for t in self.transforms)

    def _transform_transition_specs(self, specs: dict[Any, Any]) -> dict[Any, Any]:
        for t in self.transforms:
            specs = t._transform_transition_specs(specs)
        return specs

    # ------------------------------------------------------------- the chain
    def __len__(self) -> int:
        return len(self.transforms)

    def __iter__(self) -> Iterator[Transform]:
        return iter(self.transforms)

    def __getitem__(self, index: int | slice) -> Transform:
        """One transform (``int``) or a new ``Compose`` of clones (``slice``)."""
        if isinstance(index, slice):
            return Compose(*[t.clone() for t in self.transforms[index]])
        return self.transforms[index]

    def append(self, transform: Transform) -> None:
        transform = as_transform(transform)
        transform.set_container(self)
        self.transforms.append(transform)
        self._invalidate_specs()

    def insert(self, index: int, transform: Transform) -> None:
        transform = as_transform(transform)
        n = len(self.transforms)
        if not -n - 1 <= index <= n:
            raise IndexError(f"insert index {index} is out of range for {n} transforms.")
        transform.set_container(self)
        self.transforms.insert(index, transform)
        self._invalidate_specs()

    def pop(self, index: int = -1) -> Transform:
        """Removes and returns a transform (the last one by default), detached."""
        n = len(self.transforms)
        if not -n <= index < n:
            raise IndexError(
                f"Compose.pop: index {index} is out of range for a Compose of {n} transforms."
            )
        transform = self.transforms[index]
        del self.transforms[index]
        transform.reset_parent()
        self._invalidate_specs()
        return transform

    def __delitem__(self, index: int) -> None:
        self.pop(index)

    def clone(self) -> Compose:
        return Compose(*[t.clone() for t in self.transforms])

    def extra_repr(self) -> str:
        return ""
