"""``FrameSkipTransform``: repeats each action ``frame_skip`` times."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import rows_where
from rl_envs.transforms.transform import Transform


class FrameSkipTransform(Transform):
    """Repeats each action ``frame_skip`` times, summing the rewards, stopping at done.

    The repeated steps go through the env beneath this transform (``inner_env``: the
    base env and the transforms placed before this one, handed over by the
    ``TransformedEnv``); the output is the last step's, with the summed reward.

    Args:
        frame_skip: how many env steps one action lasts (>= 1).

    Example:
        >>> from rl_envs import PendulumEnv, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(max_episode_steps=10), FrameSkipTransform(4))
        >>> env.rollout(10).shape[-1]  # 10 base steps = 3 outer steps (4 + 4 + 2)
        3
    """

    steps_inner_env = True

    def __init__(self, frame_skip: int = 1) -> None:
        if frame_skip < 1:
            raise ValueError(
                "FrameSkipTransform: frame_skip should have a value greater or equal to one, "
                f"got {frame_skip}."
            )
        super().__init__()
        self.frame_skip = frame_skip

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        inner = self.inner_env
        if inner is None:
            raise RuntimeError(
                "parent not found for FrameSkipTransform: it steps an env, use it in a "
                "TransformedEnv."
            )
        reward = next_tensordict.get("reward")
        done = next_tensordict.get("done")
        for _ in range(self.frame_skip - 1):
            if bool(done.all()):
                break
            nxt = inner.step(tensordict)
            r = nxt.get("reward")
            # entries already done keep their final step (and stop accumulating)
            keep = done.reshape(*done.shape[: nxt.batch_dims], *[1] * (r.ndim - nxt.batch_dims))
            reward = torch.where(keep, reward, reward + r)
            if bool(done.any()):
                nxt = rows_where(done, next_tensordict, nxt)
            next_tensordict = nxt
            done = next_tensordict.get("done")
        next_tensordict.set("reward", reward)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "FrameSkipTransform can only be used when appended to a transformed env: it "
            "steps an env."
        )

    def extra_repr(self) -> str:
        return f"frame_skip={self.frame_skip}"
