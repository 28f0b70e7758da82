"""``RewardSum``: the running return of each episode."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, as_key_list, get_or_raise, masked_fill_reset
from rl_envs.transforms.transform import EnvSpecs, Transform


class RewardSum(Transform):
    """Accumulates rewards into ``episode_reward``, zeroed at each (partial) reset.

    ``("next", "episode_reward") = ("episode_reward") + ("next", "reward")``:
    the root entry carries the sum up to the current step, so after a reset it
    is zero for the reset entries and unchanged for the others.

    Multi-agent envs: a grouped reward such as ``("agents", "reward")`` (shape
    ``[*B, n_agents, 1]``) is summed per agent into ``("agents", "episode_reward")``;
    a (partial) reset of an env zeroes the sums of all its agents.

    Args:
        in_keys: rewards to sum (default: every reward key of the env, as in TorchRL;
            ``["reward"]`` outside an env).
        out_keys: where the sums go (default ``"episode_reward"`` for ``"reward"`` and
            ``(*prefix, "episode_<name>")`` for a nested ``(*prefix, name)``).
        reset_keys: one per in_key when given (checked at reset); partial resets read
            ``"_reset"`` here, so they are otherwise unused (TorchRL signature parity).
        reward_spec: put the sum in the reward spec instead of the observation spec.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = RewardSum()
        >>> root = t._reset(TensorDict(), TensorDict(obs=torch.zeros(1)))
        >>> t._step(root, TensorDict(reward=torch.tensor([2.0])))["episode_reward"]
        tensor([2.])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        reset_keys: Sequence[NestedKey] | None = None,
        *,
        reward_spec: bool = False,
    ) -> None:
        self._env_reward_keys = not as_key_list(in_keys) and out_keys is None
        in_keys = as_key_list(in_keys) or ["reward"]
        if out_keys is None:
            out_keys = (
                ["episode_reward"] if in_keys == ["reward"] else [_episode_key(k) for k in in_keys]
            )
        super().__init__(in_keys, out_keys)
        self.reset_keys = as_key_list(reset_keys)
        self.reward_spec = reward_spec
        self._shapes: dict[NestedKey, torch.Size] = {}

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        if self.reset_keys and len(self.reset_keys) != len(self.in_keys):
            raise ValueError(
                f"Could not match the env reset_keys {self.reset_keys} with the in_keys "
                f"{self.in_keys}: give one reset key per reward key, or none."
            )
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            shape = self._shapes.get(in_key, torch.Size((*tensordict_reset.batch_size, 1)))
            zeros = torch.zeros(shape, device=tensordict_reset.device)
            tensordict_reset.set(out_key, masked_fill_reset(tensordict, out_key, zeros))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            reward = get_or_raise(self, next_tensordict, in_key)
            previous = tensordict.get(out_key, None)
            total = reward.clone() if previous is None else previous + reward
            next_tensordict.set(out_key, total)
        return next_tensordict

    def _supports_rollout_map(self) -> bool:
        return True

    def _rollout_map(self, trajectory: TensorDictBase) -> TensorDictBase:
        nxt = trajectory.get("next")
        time_dim = trajectory.batch_dims - 1
        batch = trajectory.batch_size[:time_dim]
        steps = trajectory.batch_size[time_dim]
        done = nxt.get("done").reshape(-1, steps).cpu().numpy()
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            reward = get_or_raise(self, nxt, in_key)
            start = trajectory.get(out_key, None)
            rows = reward.reshape(batch.numel(), steps, -1)
            init = (
                start.select(time_dim, 0).reshape(rows.shape[0], -1)
                if start is not None
                else torch.zeros(rows.shape[0], rows.shape[2], dtype=reward.dtype)
            )
            root, total = _segment_sums(rows.cpu().numpy(), init.cpu().numpy(), done)
            shape = reward.shape
            trajectory.set(out_key, torch.from_numpy(root).reshape(shape).to(reward.device))
            nxt.set(out_key, torch.from_numpy(total).reshape(shape).to(reward.device))
        return trajectory

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Offline mode: the cumulative sum of each in_key along the dim named ``"time"``.

        Rollouts name their time dim so; the sum runs over the whole stored
        sequence (TorchRL's offline ``RewardSum``: no restart at episode ends).

        Raises:
            ValueError: when no batch dim is named ``"time"``.
            KeyError: when an in_key is missing.
        """
        names = tensordict.names if tensordict._has_names() else []
        if "time" not in names:
            raise ValueError(
                "RewardSum: At least one dimension of the tensordict must be named 'time' in "
                f"offline mode (got names {names or None} for batch size "
                f"{tuple(tensordict.batch_size)}); set td.names or refine_names first."
            )
        time_dim = names.index("time")
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            reward = get_or_raise(self, tensordict, in_key)
            tensordict.set(out_key, reward.cumsum(time_dim))
        return tensordict

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        from rl_envs.transforms._utils import spec_has, unbounded_like

        env_keys = list(specs.reward.keys(True, True))
        if self._env_reward_keys and env_keys and env_keys != self.in_keys:
            # TorchRL's default: sum every reward the env writes (e.g. grouped ones)
            self.in_keys = env_keys
            self.out_keys = [_episode_key(k) for k in env_keys]
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            if not spec_has(specs.reward, in_key):
                raise KeyError(
                    f"RewardSum: in_key {in_key!r} is not in the env's reward spec "
                    f"(keys: {list(specs.reward.keys(True, True))}). Pass in_keys naming a reward."
                )
            reward = specs.reward[in_key]
            self._shapes[in_key] = reward.shape
            out = unbounded_like(reward)
            if self.reward_spec:
                specs.reward[out_key] = out
            else:
                specs.observation[out_key] = out
        return specs


def _episode_key(key: NestedKey) -> NestedKey:
    if isinstance(key, tuple):
        return (*key[:-1], f"episode_{key[-1]}")
    return f"episode_{key}"


def _segment_sums(
    reward: np.ndarray, init: np.ndarray, done: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Running sums restarting after each done, added left to right in the reward's dtype.

    ``reward``: ``[rows, T, k]``, ``init``: ``[rows, k]`` (the sum before step 0),
    ``done``: ``[rows, T]``. Returns the sums before and after each step: the same
    numbers as adding one step at a time (numpy's cumsum accumulates sequentially).
    """
    before = np.empty_like(reward)
    after = np.empty_like(reward)
    steps = reward.shape[1]
    for row in range(reward.shape[0]):
        ends = np.flatnonzero(done[row]).tolist()
        start, first = 0, init[row]
        for end in [*ends, steps - 1]:
            if start > end:
                break
            seg = np.concatenate([first[None], reward[row, start : end + 1]], 0)
            acc = np.cumsum(seg, axis=0, dtype=reward.dtype)
            before[row, start : end + 1] = acc[:-1]
            after[row, start : end + 1] = acc[1:]
            start, first = end + 1, np.zeros_like(first)
    return before, after
