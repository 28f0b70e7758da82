"""``MCAdvantage``: group-relative advantages, written once every answer of a prompt is in."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Literal

import torch
from tensordict import NestedKey, TensorDictBase, lazy_stack

from rl_llm.objectives.functional import group_relative_advantage


def _group_id(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return tuple(value.flatten().tolist())
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list):
        return tuple(_group_id(v) for v in value)
    return value


class MCAdvantage:
    """Holds trajectories by prompt and releases each group with its group-relative advantage.

    A replay-buffer transform (its :meth:`inv` runs on ``extend``): trajectories
    sharing ``prompt_key`` are queued; when ``grpo_size`` of them are in, each
    trajectory's return ``R_i`` (sum of its rewards) becomes
    ``A_i = (R_i - mean(R)) / (std(R) + eps)`` (GRPO) or ``R_i - mean(R)``
    (``scale=False``, Dr. GRPO), written at ``advantage_key`` on every step, and
    the group is returned; incomplete groups give an empty batch.

    Args:
        grpo_size: answers per prompt (the group size, >= 2).
        prompt_key: the group identifier (a prompt string, a History, or an id tensor).
        rewards_key: per-step rewards (``[T, 1]``). Defaults to ``("next", "reward")``.
        advantage_key: where advantages are written. Defaults to ``"advantage"``.
        done_key: ends of trajectories (a batch may hold several). Defaults to ``("next", "done")``.
        verbose: print a line per released group.
        trajectory_return: how a trajectory's rewards become its return: ``"sum"`` (default), ``"mean"``, ``"max"``.
        scale: divide by the group's standard deviation. Defaults to ``True``.
        eps: added to the standard deviation.

    Examples:
        >>> from tensordict import TensorDict
        >>> mc = MCAdvantage(grpo_size=2, prompt_key="query")
        >>> def step(r):
        ...     return TensorDict({"query": "1+1=", ("next", "reward"): torch.tensor([[r]]),
        ...                        ("next", "done"): torch.tensor([[True]])}, batch_size=(1,))
        >>> mc.inv(step(1.0)).batch_size, mc.inv(step(0.0))["advantage"].flatten().tolist()
        (torch.Size([0]), [0.7071062922477722, -0.7071062922477722])
    """

    def __init__(
        self,
        grpo_size: int,
        prompt_key: NestedKey = "query",
        rewards_key: NestedKey = ("next", "reward"),
        advantage_key: NestedKey = "advantage",
        done_key: NestedKey = ("next", "done"),
        verbose: bool = False,
        *,
        trajectory_return: Literal["sum", "mean", "max"] = "sum",
        scale: bool = True,
        eps: float = 1e-6,
    ) -> None:
        if grpo_size < 2:
            raise ValueError(
                f"grpo_size must be >= 2 (advantages are relative to the group), got {grpo_size}."
            )
        if trajectory_return not in ("sum", "mean", "max"):
            raise ValueError(
                f"trajectory_return must be 'sum', 'mean' or 'max', got {trajectory_return!r}."
            )
        self.grpo_size = grpo_size
        self.prompt_key = prompt_key
        self.rewards_key = rewards_key
        self.advantage_key = advantage_key
        self.done_key = done_key
        self.verbose = verbose
        self.trajectory_return = trajectory_return
        self.scale = scale
        self.eps = eps
        self.queues: dict[Any, list[tuple[TensorDictBase, torch.Tensor]]] = defaultdict(list)

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Sampling leaves data unchanged (the work is done when writing, by :meth:`inv`)."""
        return tensordict

    def _split(self, td: TensorDictBase) -> list[TensorDictBase]:
        if td.batch_dims != 1:
            raise ValueError(
                f"MCAdvantage expects a batch of steps [T] (one or several trajectories), got batch_size "
                f"{tuple(td.batch_size)}; flatten it first (td.reshape(-1))."
            )
        done = td.get(self.done_key, None)
        if done is None:
            raise KeyError(
                f"MCAdvantage reads trajectory ends at {self.done_key!r}, which is missing."
            )
        ends = done.reshape(td.shape[0], -1).any(-1).nonzero().flatten().tolist()
        if not ends or ends[-1] != td.shape[0] - 1:
            raise ValueError(
                f"The last step of a batch written through MCAdvantage must end a trajectory ({self.done_key!r} "
                "True): write whole trajectories."
            )
        starts = [0, *[e + 1 for e in ends[:-1]]]
        return [td[s : e + 1] for s, e in zip(starts, ends, strict=True)]

    def _return(self, trajectory: TensorDictBase) -> torch.Tensor:
        rewards = trajectory.get(self.rewards_key, None)
        if rewards is None:
            raise KeyError(f"MCAdvantage reads rewards at {self.rewards_key!r}, which is missing.")
        rewards = rewards.reshape(trajectory.shape[0], -1).sum(-1).float()
        return getattr(rewards, self.trajectory_return)()

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Queues the trajectories in ``tensordict``; returns the steps of every completed group."""
        released = []
        for trajectory in self._split(tensordict):
            group = _group_id(trajectory[0].get(self.prompt_key))
            queue = self.queues[group]
            queue.append((trajectory, self._return(trajectory)))
            if len(queue) < self.grpo_size:
                continue
            del self.queues[group]
            returns = torch.stack([r for _, r in queue])
            advantages = group_relative_advantage(returns, scale=self.scale, eps=self.eps)
            if self.verbose:
                print(f"MCAdvantage: group of {len(queue)} released, returns {returns.tolist()}")
            for (t, _), a in zip(queue, advantages, strict=True):
                reward = t.get(self.rewards_key)
                t.set(self.advantage_key, a.expand(reward.shape).to(reward.dtype))
                released.extend(t.unbind(0))
        if not released:
            return tensordict[:0]
        return lazy_stack(released)
