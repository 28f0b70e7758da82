"""Hindsight Experience Replay (Andrychowicz et al., 2017, arXiv:1707.01495)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_buffers._layout import NestedKey, as_tuple
from rl_buffers.samplers._trajectories import Trajectories, locate
from rl_buffers.tensordict_replay_buffer import TensorDictReplayBuffer


class HindsightStrategy(str, enum.Enum):
    """Which achieved goal replaces the desired one.

    ``FINAL``: the episode's last achieved goal. ``FUTURE``: one achieved at
    this step or later in the episode. ``EPISODE``: any step of the episode.
    ``RANDOM``: any stored step.
    """

    FINAL = "final"
    FUTURE = "future"
    EPISODE = "episode"
    RANDOM = "random"


def choose_goal_steps(
    position: torch.Tensor, trajs: Trajectories, strategy: HindsightStrategy, n_stored: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:  # fmt: skip
    """For each sampled flat ``position``, the flat position whose achieved goal becomes the goal.

    Examples:
        >>> trajs = Trajectories(torch.tensor([0, 3]), torch.tensor([3, 2]), torch.tensor([0, 0, 0, 1, 1]))
        >>> choose_goal_steps(torch.tensor([1, 3]), trajs, HindsightStrategy.FINAL, 5).tolist()
        [2, 4]
    """
    traj = trajs.traj_of[position]
    start, end = trajs.start[traj], trajs.start[traj] + trajs.length[traj] - 1
    u = torch.rand(position.shape, generator=generator)
    if strategy is HindsightStrategy.FINAL:
        return end
    if strategy is HindsightStrategy.FUTURE:
        return position + (u * (end - position + 1)).long().clamp_max(end - position)
    if strategy is HindsightStrategy.EPISODE:
        return start + (u * (end - start + 1)).long().clamp_max(end - start)
    return (u * n_stored).long().clamp_max(n_stored - 1)


class HERReplayBuffer(TensorDictReplayBuffer):
    """Relabels a fraction of each sampled batch with goals achieved later on.

    For the first ``int(batch * her_ratio)`` samples (the batch is in random order, as
    TorchRL), ``goal_key`` (and ``("next", goal_key)``
    if stored) is replaced by the achieved goal (``("next", achieved_goal_key)``
    when stored, else ``achieved_goal_key``) of a step chosen by ``strategy``
    in the same episode (episodes end where ``end_key`` is True, and at the
    storage end and write seam); the reward is recomputed with ``reward_fn``
    on the relabelled batch. The rest keep their goals and rewards.
    ``her_relabelled`` (bool ``[batch]``) tells which were changed.

    Args:
        reward_fn: relabelled TensorDict -> reward (``[batch]`` or the stored reward's shape).
        her_ratio: fraction relabelled, in ``[0, 1]``. Default: ``0.8``.
        strategy: ``"future"`` (default), ``"final"``, ``"episode"`` or ``"random"``.
        goal_key: default ``"desired_goal"``.
        achieved_goal_key: default ``"achieved_goal"``.
        reward_key: default ``("next", "reward")``.
        end_key: default ``("next", "done")``.
        **kwargs: as in :class:`TensorDictReplayBuffer` (a tensor storage is needed).

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage
        >>> def reward_fn(td):
        ...     return (td["next", "achieved_goal"] - td["desired_goal"]).norm(dim=-1, keepdim=True).lt(0.1).float()
        >>> rb = HERReplayBuffer(reward_fn, her_ratio=1.0, strategy="final", storage=LazyTensorStorage(10))
        >>> steps = TensorDict({"desired_goal": torch.ones(4, 2), "achieved_goal": torch.zeros(4, 2),
        ...     "next": {"achieved_goal": torch.arange(8.0).view(4, 2), "reward": torch.zeros(4, 1),
        ...              "done": torch.tensor([[False], [False], [False], [True]])}}, batch_size=[4])
        >>> _ = rb.extend(steps)
        >>> batch = rb.sample(3)
        >>> batch["desired_goal"].unique(dim=0).tolist()
        [[6.0, 7.0]]
        >>> bool((batch["next", "reward"].squeeze(-1) == (batch["index"] == 3).float()).all())
        True
    """

    def __init__(
        self,
        reward_fn: Callable[[TensorDictBase], torch.Tensor],
        *,
        her_ratio: float = 0.8,
        strategy: HindsightStrategy | str = "future",
        goal_key: NestedKey = "desired_goal",
        achieved_goal_key: NestedKey = "achieved_goal",
        reward_key: NestedKey = ("next", "reward"),
        end_key: NestedKey = ("next", "done"),
        **kwargs: Any,
    ) -> None:
        if not 0.0 <= her_ratio <= 1.0:
            raise ValueError(f"her_ratio must be in [0, 1], got {her_ratio}.")
        super().__init__(**kwargs)
        if not hasattr(self._storage, "get_leaf") or self._storage.ndim != 1:
            raise TypeError(
                "HERReplayBuffer needs a 1-d tensor storage (LazyTensorStorage or LazyMemmapStorage)."
            )
        self.reward_fn = reward_fn
        self.her_ratio = her_ratio
        self.strategy = HindsightStrategy(strategy)
        self.goal_key, self.achieved_goal_key = as_tuple(goal_key), as_tuple(achieved_goal_key)
        self.reward_key, self.end_key = as_tuple(reward_key), as_tuple(end_key)
        self._cache: tuple[int, Trajectories] | None = None

    def __repr__(self) -> str:
        return (f"HERReplayBuffer(strategy={self.strategy.value!r}, her_ratio={self.her_ratio}, "
                f"goal_key={self.goal_key!r}, achieved_goal_key={self.achieved_goal_key!r}, "
                f"storage={type(self._storage).__name__}(max_size={self._storage.max_size}), len={len(self)})")  # fmt: skip

    def _trajectories(self) -> Trajectories:
        count = self._storage.write_count
        if self._cache is None or self._cache[0] != count:
            if not self._storage.has_key(self.end_key):
                raise KeyError(
                    f"HERReplayBuffer: the stored data has no end flag {self.end_key!r}."
                )
            self._cache = (count, locate(self._storage, end_key=self.end_key, traj_key=None))
        return self._cache[1]

    def _post_sample(self, data: Any, info: dict[str, Any], written: bool = False) -> Any:
        data = super()._post_sample(data, info, written)
        position = info["index"].cpu()
        relabel = torch.arange(position.shape[0]) < int(position.shape[0] * self.her_ratio)
        data.set("her_relabelled", relabel.to(data.device or "cpu"))
        if not bool(relabel.any()):
            return data
        rows = relabel.nonzero().squeeze(-1)
        goal_pos = choose_goal_steps(
            position[rows], self._trajectories(), self.strategy, len(self._storage)
        )
        source = ("next", *self.achieved_goal_key)
        if not self._storage.has_key(source):
            source = self.achieved_goal_key
        new_goal = self._storage.get_leaf(source)[goal_pos.to(self._storage.device)].to(
            data.device or "cpu"
        )
        dev_rows = rows.to(data.device or "cpu")
        goal = data.get(self.goal_key, None)
        if goal is None:
            raise KeyError(
                f"HERReplayBuffer: goal_key {self.goal_key!r} is not in the stored data; pass "
                "goal_key= naming the entry that holds the desired goal."
            )
        goal = goal.clone()
        goal[dev_rows] = new_goal
        data.set(self.goal_key, goal)
        next_goal_key = ("next", *self.goal_key)
        if data.get(next_goal_key, None) is not None:
            next_goal = data.get(next_goal_key).clone()
            next_goal[dev_rows] = new_goal
            data.set(next_goal_key, next_goal)
        reward = data.get(self.reward_key).clone()
        new_reward = self.reward_fn(data[dev_rows])
        reward[dev_rows] = new_reward.reshape(reward[dev_rows].shape).to(reward.dtype)
        data.set(self.reward_key, reward)
        return data
