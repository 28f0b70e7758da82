"""``Reward2GoTransform``: discounted reward-to-go of stored trajectories (a replay-buffer transform)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import Transform

# Kept free of regex metacharacters but ".": callers match on it (TorchRL's ENV_ERR).
_ENV_ERR = (
    "The Reward2GoTransform is only an inverse transform and can only be applied to the "
    "replay buffer: it needs whole episodes, so append it to a replay buffer where it "
    "runs on writes through inv, or call its inv on collected batches, not inside an env."
)


def reward_to_go(
    reward: torch.Tensor, done: torch.Tensor, gamma: float | torch.Tensor
) -> torch.Tensor:
    """``g_t = r_t + gamma * g_{t+1}``, restarting after every ``done``; time is dim ``-2``.

    The steps after the last ``done`` are treated as an episode ending at the last step.

    Example:
        >>> r = torch.ones(1, 4, 1)
        >>> d = torch.tensor([False, True, False, False]).reshape(1, 4, 1)
        >>> reward_to_go(r, d, 0.5).flatten().tolist()
        [1.5, 1.0, 1.5, 1.0]
    """
    if reward.shape != done.shape:
        raise ValueError(
            f"reward_to_go: reward and done must share one shape, got {tuple(reward.shape)} "
            f"and {tuple(done.shape)}."
        )
    out = torch.empty_like(reward)
    running = torch.zeros_like(reward.select(-2, 0))
    gamma = torch.as_tensor(gamma, dtype=reward.dtype, device=reward.device)
    for t in range(reward.shape[-2] - 1, -1, -1):
        keep = ~done.select(-2, t)
        running = reward.select(-2, t) + gamma * running * keep
        out.select(-2, t).copy_(running)
    return out


class Reward2GoTransform(Transform):
    """Writes the discounted reward-to-go of ``in_keys`` to ``out_keys`` on ``inv`` (buffer writes).

    Data must be ``[*B, T]`` trajectories holding ``("next", done_key)``, with at least
    one episode end per trajectory. ``forward`` (sampling) is the identity.

    Args:
        gamma: the discount factor.
        in_keys: the rewards (default ``[("next", "reward")]``).
        out_keys: destinations (default ``in_keys``).
        done_key: the done entry under ``"next"``.

    Raises:
        RuntimeError: a trajectory without any episode end.
        KeyError: none of ``in_keys`` is present.
        ValueError: used inside an env.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> done = torch.tensor([False, False, True]).reshape(1, 3, 1)
        >>> td = TensorDict(next=TensorDict(reward=torch.ones(1, 3, 1), done=done,
        ...                                 batch_size=[1, 3]), batch_size=[1, 3])
        >>> Reward2GoTransform(gamma=0.5).inv(td)["next", "reward"].flatten().tolist()
        [1.75, 1.5, 1.0]
    """

    def __init__(
        self,
        gamma: float | torch.Tensor | None = 1.0,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        done_key: NestedKey | None = "done",
    ) -> None:
        keys = list(in_keys) if in_keys is not None else [("next", "reward")]
        outs = list(out_keys) if out_keys is not None else list(keys)
        super().__init__(keys, keys, keys, outs)
        self.done_key = done_key
        self.register_buffer("gamma", torch.as_tensor(1.0 if gamma is None else gamma))

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        done = tensordict.get(("next", self.done_key))
        if not bool(done.any(-2).all()):
            raise RuntimeError(
                "Reward2GoTransform: no episode end found in some trajectory; collect batches "
                "longer than an episode (frames_per_batch > steps per episode)."
            )
        found = False
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv, strict=True):
            reward = tensordict.get(in_key, None)
            if reward is not None:
                found = True
                tensordict.set(out_key, reward_to_go(reward, done, self.gamma))
        if not found:
            raise KeyError(
                f"Reward2GoTransform: Could not find any of the input keys {self.in_keys_inv} "
                f"in the TensorDict (present: {list(tensordict.keys(True, True))})."
            )
        return tensordict

    ENV_ERR = _ENV_ERR
    """The error raised when the transform is used in an env (TorchRL's class attribute)."""

    def _has_inverse(self) -> bool:
        return True

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        raise ValueError(_ENV_ERR)

    def transform_specs(self, specs: Any) -> Any:
        raise ValueError(_ENV_ERR)
