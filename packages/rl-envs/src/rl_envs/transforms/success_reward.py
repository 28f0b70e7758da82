"""``SuccessReward``: a sparse reward from a binary success signal."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.specs import Bounded
from rl_envs.transforms._utils import NestedKey, spec_has
from rl_envs.transforms.transform import EnvSpecs, Transform


class SuccessReward(Transform):
    """Writes ``reward = scale * success`` at each step (``0`` without success).

    For tasks that report completion apart from their reward (goal-conditioned or sparse
    robotics tasks). In an env the step reward is overwritten (resets write none) and the
    reward spec becomes a ``Bounded`` over ``[min(0, scale), max(0, scale)]`` shaped like
    the success entry; on a replay-buffer sample it rewrites the stored reward.

    Args:
        success_key: the boolean (or 0/1) success entry (default ``"success"``).
        reward_key: the reward written (default ``"reward"``).
        scale: the reward on success (default 1.0).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(success=torch.tensor([True, False]))
        >>> SuccessReward(scale=2.0)(td)["reward"]
        tensor([2., 0.])
    """

    def __init__(
        self,
        success_key: NestedKey = "success",
        reward_key: NestedKey = "reward",
        *,
        scale: float = 1.0,
    ) -> None:
        super().__init__(in_keys=[success_key], out_keys=[reward_key])
        self.scale = float(scale)

    def _apply_transform(self, success: torch.Tensor) -> torch.Tensor:
        return success.to(torch.get_default_dtype()) * self.scale

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return tensordict_reset  # a reset has no reward

    def _rewrite(self, reward_spec: Any, *where: Any) -> Any:
        """Sets the bounded reward, shaped like the success entry (first found in ``where``)
        or, failing that, like the existing reward."""
        success, reward = self.in_keys[0], self.out_keys[0]
        leaf = next((c[success] for c in where if spec_has(c, success)), None)
        if leaf is None and spec_has(reward_spec, reward):
            leaf = reward_spec[reward]
        if leaf is None:
            raise RuntimeError(
                f"SuccessReward could not infer the reward shape: {success!r} is not in the "
                f"env's observation or done specs and {reward!r} is not an existing reward entry."
            )
        reward_spec[reward] = Bounded(
            low=min(0.0, self.scale),
            high=max(0.0, self.scale),
            shape=leaf.shape,
            device=leaf.device,
            dtype=torch.get_default_dtype(),
        )
        return reward_spec

    def transform_reward_spec(self, reward_spec: Any) -> Any:
        return self._rewrite(reward_spec)

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        specs.reward = self._rewrite(specs.reward, specs.observation, specs.done)
        return specs

    def extra_repr(self) -> str:
        return (
            f"success_key={self.in_keys[0]!r}, reward_key={self.out_keys[0]!r}, scale={self.scale}"
        )
