"""``ActionMask``: keeps the action spec's mask in sync with the env's ``action_mask``."""

from __future__ import annotations

from typing import Any

from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, get_or_raise
from rl_envs.transforms.transform import FORWARD_NOT_IMPLEMENTED, Transform


class ActionMask(Transform):
    """Updates the (Categorical / OneHot) action spec's mask from ``action_mask`` outputs.

    After each reset and step, the mask read from the output is set on the
    enclosing env's action spec, so ``env.rand_action`` (and random rollouts)
    only draw allowed actions. Needs an env.

    Args:
        action_key: the action entry.
        mask_key: the mask entry (bool, ``[*B, n]``, ``True`` = allowed).

    Example:
        >>> t = ActionMask()
        >>> t.in_keys
        ['action_mask']
    """

    def __init__(
        self, action_key: NestedKey = "action", mask_key: NestedKey = "action_mask"
    ) -> None:
        super().__init__(in_keys=[mask_key])
        self.action_key = action_key
        self.mask_key = mask_key

    def _spec(self) -> Any:
        env, _ = self._env_and_index()
        if env is None:
            raise RuntimeError(
                "ActionMask updates an env's action spec: use it in a TransformedEnv."
            )
        spec = env.full_action_spec[self.action_key]
        if not hasattr(spec, "update_mask"):
            raise TypeError(
                f"ActionMask: the action spec is a {type(spec).__name__}, which has no mask; "
                "use a Categorical or OneHot action spec."
            )
        return spec

    def _apply(self, tensordict: TensorDictBase) -> TensorDictBase:
        mask = get_or_raise(self, tensordict, self.mask_key)
        self._spec().update_mask(mask.clone())
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._apply(next_tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._apply(tensordict_reset)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            FORWARD_NOT_IMPLEMENTED.format(type(self))
            + " ActionMask edits an env's action spec: use it in a TransformedEnv."
        )
