"""``DiscreteActionProjection``: a policy over ``max_actions`` one-hot actions drives an env
with fewer."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from torch.nn import functional

from rl_envs.specs import OneHot
from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import Transform


class DiscreteActionProjection(Transform):
    """Maps one-hot actions over ``max_actions`` choices to the env's ``num_actions_effective``.

    The env's action spec becomes a ``OneHot(max_actions)``, so a policy shared by envs
    with different action counts sees one layout. On the way in (``inv``) an action
    ``i < num_actions_effective`` is kept and a larger one is replaced by a uniform draw
    among the valid ones; the caller's TensorDict keeps the wide action. ``forward`` (a
    replay-buffer sample, a module chain) widens stored actions back to ``max_actions``
    when ``include_forward``.

    Args:
        num_actions_effective: the env's number of actions.
        max_actions: the number of actions the policy writes (>= ``num_actions_effective``).
        action_key: the one-hot action entry (default ``"action"``).
        include_forward: widen actions in ``forward`` too (default ``True``).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DiscreteActionProjection(3, 5)
        >>> t.inv(TensorDict(action=torch.tensor([0, 1, 0, 0, 0])))["action"]
        tensor([0, 1, 0])
        >>> t(TensorDict(action=torch.tensor([0, 0, 1])))["action"]
        tensor([0, 0, 1, 0, 0])
    """

    def __init__(
        self,
        num_actions_effective: int,
        max_actions: int,
        action_key: NestedKey = "action",
        include_forward: bool = True,
    ) -> None:
        if max_actions < num_actions_effective:
            raise RuntimeError(
                f"DiscreteActionProjection: max_actions ({max_actions}) must be greater than "
                f"or equal to num_actions_effective ({num_actions_effective})."
            )
        super().__init__(
            in_keys=[action_key] if include_forward else [],
            in_keys_inv=[action_key],
        )
        self.num_actions_effective = int(num_actions_effective)
        self.max_actions = int(max_actions)
        self.action_key = action_key

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict  # env outputs hold no action to map

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return tensordict_reset

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        for key in self.in_keys:
            value = tensordict.get(key, None)
            if value is not None:
                tensordict.set(key, self._apply_transform(value))
        return tensordict

    def _apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        return functional.one_hot(action.argmax(-1), self.max_actions).to(action.dtype)

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        if action.shape[-1] != self.max_actions:
            raise RuntimeError(
                f"DiscreteActionProjection: action.shape[-1]={action.shape[-1]} must match "
                f"max_actions={self.max_actions}."
            )
        index = action.long().argmax(-1)
        invalid = index >= self.num_actions_effective
        if invalid.any():
            draw = torch.randint(
                self.num_actions_effective, (int(invalid.sum()),), device=index.device
            )
            index = index.masked_scatter(invalid, draw)
        return functional.one_hot(index, self.num_actions_effective).to(action.dtype)

    def transform_leaf_spec_inv(self, spec: Any) -> Any:
        return OneHot(
            self.max_actions,
            shape=(*spec.shape[:-1], self.max_actions),
            device=spec.device,
            dtype=spec.dtype,
        )

    def extra_repr(self) -> str:
        return (
            f"num_actions_effective={self.num_actions_effective}, "
            f"max_actions={self.max_actions}, in_keys_inv={self.in_keys_inv}"
        )
