"""``MCAdvantage``: group-relative advantages, written once a prompt's group of replies is in."""

from __future__ import annotations

import contextlib
import multiprocessing
from typing import Any, Literal

import torch
from tensordict import LazyStackedTensorDict, NestedKey, TensorDict, TensorDictBase, lazy_stack

from rl_llm.objectives.mc_selector import MCAdvantageSelector, mean_inside

STATS = (
    "completed_trajectories",
    "completed_decisions",
    "trajectory_return_sum",
    "trajectory_return_max",
    "successful_trajectories",
    "completed_groups",
    "written_groups",
    "dropped_groups",
    "rescued_groups",
    "selected_trajectories",
    "unselected_trajectories",
)


def _group_id(value: Any) -> Any:
    """A hashable group identifier: tensors group by value, strings and lists as themselves."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else tuple(value.flatten().tolist())
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list):
        return tuple(_group_id(v) for v in value)
    return value


def _step_rewards(trajectory: TensorDictBase, key: NestedKey) -> list[torch.Tensor]:
    """Per-step rewards of a trajectory (steps may hold rewards of different shapes)."""
    try:
        rewards = trajectory.get(key, None)
    except RuntimeError:  # ragged across steps of a lazy stack
        return list(trajectory.get(key, as_list=True))
    if rewards is None:
        raise KeyError(
            f"MCAdvantage reads rewards at {key!r}, which is missing; keys present: "
            f"{sorted(map(str, trajectory.keys(True, True)))}."
        )
    return list(rewards.unbind(0))


def _materialize(trajectory: TensorDictBase) -> TensorDictBase:
    """A dense copy of a lazily stacked trajectory when that loses nothing, else the trajectory."""
    if not isinstance(trajectory, LazyStackedTensorDict):
        return trajectory
    try:
        dense = trajectory.contiguous()
    except RuntimeError:  # ragged leaves stay lazily stacked
        return trajectory
    # densifying can turn stacked strings into empty sub-TensorDicts: keep the lazy form then
    if set(trajectory.keys(True, True)) - set(dense.keys(True, True)):
        return trajectory
    return dense


def _concatenate(trajectories: list[TensorDictBase]) -> TensorDictBase:
    try:
        return torch.cat([_materialize(t) for t in trajectories], 0)
    except (RuntimeError, ValueError, TypeError):
        return lazy_stack([step for t in trajectories for step in t.unbind(0)])


class MCAdvantage:
    """Holds trajectories by group (the prompt) and writes each complete group with advantages.

    A replay-buffer transform: its :meth:`inv` runs on ``extend`` and returns ``None``
    until a group is ready, then the group's steps with ``advantage_key`` set
    (GRPO, DeepSeekMath arXiv:2402.03300). Trajectories are split on ``done_key``; the
    first step's ``prompt_key`` (a string, or a tensor grouped by value) names the group.

    Two normalisations, as TorchRL's:

    * ``trajectory_return=None`` (default): every per-step reward value of the group's
      ``grpo_size`` trajectories is normalised by the mean and standard deviation of
      all of them (dense per-step rewards; steps may hold rewards of different shapes).
    * ``trajectory_return="sum" | "max" | "mean"``: each trajectory is reduced to a
      return ``R_i``; ``A_i = (R_i - mean R) / std R`` is written on every step.
      ``keep_return_bounds=(low, high)`` then drops groups whose mean return is not
      strictly inside the bounds (DAPO's dynamic sampling, arXiv:2503.14476), and
      ``candidate_group_size > grpo_size`` collects extra candidates from which
      ``candidate_selector`` keeps ``grpo_size`` (tried from ``candidate_selection_min_size``
      candidates on; the group is dropped when ``candidate_group_size`` are in and no
      subset fits).

    Counters of what was written and dropped (``completed_groups``, ``written_groups``,
    ``dropped_groups``, ``rescued_groups``, ...) are attributes; :meth:`get_stats`
    snapshots them. :meth:`share_memory_` moves the queues and counters to a
    ``multiprocessing`` manager so that several writer processes complete the same groups.

    Args:
        grpo_size: trajectories per group.
        prompt_key: the group identifier. Defaults to ``"query"``.
        rewards_key: per-step rewards. Defaults to ``("next", "reward")``.
        advantage_key: where advantages go. Defaults to ``"advantage"``.
        done_key: ends of trajectories. Defaults to ``("next", "done")``.
        verbose: print a line per group decision.
        trajectory_return: ``None``, ``"sum"``, ``"max"`` or ``"mean"`` (see above).
        keep_return_bounds: exclusive bounds on a kept group's mean return.
        candidate_group_size: candidates collected per group (default ``grpo_size``).
        candidate_selection_min_size: candidates before the first selection (default ``grpo_size``).
        candidate_selector: picks ``grpo_size`` candidates (default :class:`MCAdvantageSelector`).
        scale: divide by the standard deviation (``False``: Dr. GRPO, arXiv:2503.20783).
        eps: lower bound of the standard deviation.

    Raises:
        ValueError: for inconsistent group sizes, bounds without ``trajectory_return``,
            decreasing bounds, or an unknown ``trajectory_return``.

    Examples:
        >>> def traj(group, rewards):
        ...     n = len(rewards)
        ...     return TensorDict({"group_id": torch.full((n,), group),
        ...                        ("next", "reward"): torch.tensor(rewards).reshape(n, 1),
        ...                        ("next", "done"): torch.arange(n).reshape(n, 1) == n - 1}, [n])
        >>> mc = MCAdvantage(grpo_size=2, prompt_key="group_id", trajectory_return="sum")
        >>> mc.inv(traj(7, [0.0, 0.0])) is None
        True
        >>> mc.inv(traj(7, [0.0, 1.0]))["advantage"].flatten()
        tensor([-0.7071, -0.7071,  0.7071,  0.7071])
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
        trajectory_return: Literal["sum", "max", "mean"] | None = None,
        keep_return_bounds: tuple[float, float] | None = None,
        candidate_group_size: int | None = None,
        candidate_selection_min_size: int | None = None,
        candidate_selector: MCAdvantageSelector | None = None,
        scale: bool = True,
        eps: float = 1e-6,
    ) -> None:
        if trajectory_return not in (None, "sum", "max", "mean"):
            raise ValueError(
                f"trajectory_return must be one of 'sum', 'max', 'mean' or None, got {trajectory_return!r}."
            )
        if trajectory_return is not None and grpo_size < 2:
            raise ValueError(
                f"trajectory_return needs grpo_size >= 2: returns are normalised over the group (a "
                f"standard deviation over one return is undefined), got grpo_size={grpo_size}."
            )
        candidate_group_size = (
            grpo_size if candidate_group_size is None else int(candidate_group_size)
        )
        if candidate_group_size < grpo_size:
            raise ValueError(
                f"candidate_group_size must be >= grpo_size, got candidate_group_size={candidate_group_size} "
                f"and grpo_size={grpo_size}."
            )
        if candidate_group_size > grpo_size and trajectory_return is None:
            raise ValueError(
                "candidate_group_size > grpo_size requires trajectory_return: candidates are selected "
                "by their return."
            )
        min_size = (
            grpo_size if candidate_selection_min_size is None else int(candidate_selection_min_size)
        )
        if not grpo_size <= min_size <= candidate_group_size:
            raise ValueError(
                f"candidate_selection_min_size must lie in [grpo_size, candidate_group_size] = "
                f"[{grpo_size}, {candidate_group_size}], got {min_size}."
            )
        if keep_return_bounds is not None:
            if trajectory_return is None:
                raise ValueError(
                    "keep_return_bounds (dynamic sampling) filters groups on trajectory returns: set "
                    "trajectory_return to 'sum', 'max' or 'mean'."
                )
            if len(keep_return_bounds) != 2 or not keep_return_bounds[0] < keep_return_bounds[1]:
                raise ValueError(
                    f"keep_return_bounds must be an increasing (low, high) pair, got {keep_return_bounds}."
                )
            keep_return_bounds = (float(keep_return_bounds[0]), float(keep_return_bounds[1]))
        self.grpo_size = grpo_size
        self.prompt_key = prompt_key
        self.rewards_key = rewards_key
        self.advantage_key = advantage_key
        self.done_key = done_key
        self.verbose = verbose
        self.trajectory_return = trajectory_return
        self.keep_return_bounds = keep_return_bounds
        self.candidate_group_size = candidate_group_size
        self.candidate_selection_min_size = min_size
        self.candidate_selector = candidate_selector or MCAdvantageSelector()
        self.scale = scale
        self.eps = eps
        self.in_keys = [prompt_key, rewards_key, done_key]
        self.out_keys = [advantage_key]
        self.queues: Any = {}  # group -> list of queued trajectories (a manager dict once shared)
        self._stats: Any = {}
        self._lock: Any = contextlib.nullcontext()
        self._manager: Any = None
        self.reset_stats()

    # ---- counters ---------------------------------------------------------------------
    completed_trajectories = property(lambda self: self._stats["completed_trajectories"])
    completed_decisions = property(lambda self: self._stats["completed_decisions"])
    trajectory_return_sum = property(lambda self: self._stats["trajectory_return_sum"])
    trajectory_return_max = property(lambda self: self._stats["trajectory_return_max"])
    successful_trajectories = property(lambda self: self._stats["successful_trajectories"])
    completed_groups = property(lambda self: self._stats["completed_groups"])
    written_groups = property(lambda self: self._stats["written_groups"])
    dropped_groups = property(lambda self: self._stats["dropped_groups"])
    rescued_groups = property(lambda self: self._stats["rescued_groups"])
    selected_trajectories = property(lambda self: self._stats["selected_trajectories"])
    unselected_trajectories = property(lambda self: self._stats["unselected_trajectories"])

    def _add(self, name: str, value: float) -> None:
        self._stats[name] = self._stats[name] + value

    def reset_stats(self) -> None:
        """Zeroes the counters (queued trajectories stay)."""
        with self._lock:
            for name in STATS:
                self._stats[name] = float("-inf") if name == "trajectory_return_max" else 0
            self._stats["trajectory_return_sum"] = 0.0

    def clear_queues(self) -> None:
        """Forgets the incomplete groups (counters stay)."""
        with self._lock:
            self.queues.clear()

    @property
    def queued_groups(self) -> int:
        """Incomplete groups held."""
        return len(self.queues)

    @property
    def queued_trajectories(self) -> int:
        """Trajectories held in incomplete groups."""
        return sum(len(q) for q in self.queues.values())

    @property
    def max_queued_trajectories_per_group(self) -> int:
        """The largest number of trajectories held for one group."""
        return max((len(q) for q in self.queues.values()), default=0)

    def get_stats(self) -> dict[str, float | int]:
        """A snapshot of the counters and of the queues' sizes."""
        with self._lock:
            stats = {name: self._stats[name] for name in STATS}
            stats["queued_groups"] = self.queued_groups
            stats["queued_trajectories"] = self.queued_trajectories
            stats["max_queued_trajectories_per_group"] = self.max_queued_trajectories_per_group
            return stats

    # ---- sharing ----------------------------------------------------------------------
    @property
    def is_shared(self) -> bool:
        """Whether the queues and counters live in a ``multiprocessing`` manager."""
        return self._manager is not None or not isinstance(self.queues, dict)

    def share_memory_(self) -> MCAdvantage:
        """Moves the queues and counters to a ``multiprocessing`` manager (idempotent); returns self.

        Writers in other processes (a forked or pickled copy of this transform) then fill the
        same groups, so a group whose replies come from several workers completes.
        """
        if self.is_shared:
            return self
        manager = multiprocessing.Manager()
        queues, stats = manager.dict(), manager.dict()
        queues.update({g: list(q) for g, q in self.queues.items()})
        stats.update(self._stats)
        self._manager, self.queues, self._stats = manager, queues, stats
        self._lock = manager.RLock()
        return self

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_manager"] = None  # the proxies travel; the manager process stays with its owner
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # ---- transform --------------------------------------------------------------------
    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Sampling leaves data unchanged (the work is done when writing, by :meth:`inv`)."""
        return tensordict

    forward = __call__

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase | None:
        """Queues the trajectories of ``tensordict``; returns the steps of every group made complete.

        ``tensordict`` is ``[T]`` (one or several trajectories, split at ``done_key``) or
        ``[N, T]`` (one trajectory per row, or several). Returns ``None`` when no group completed.

        Raises:
            ValueError: if the batch does not end a trajectory.
            KeyError: if the done or reward entry is missing.
        """
        if tensordict.batch_dims == 0:
            raise ValueError(
                "MCAdvantage expects a batch of steps [T] or [N, T], got a TensorDict without batch dims."
            )
        rows = (
            [tensordict]
            if tensordict.batch_dims == 1
            else list(tensordict.reshape(-1, tensordict.shape[-1]).unbind(0))
        )
        released = []
        for row in rows:
            for trajectory in self._split(row):
                with self._lock:
                    out = self._add_trajectory(trajectory)
                if out is not None:
                    released.append(out)
        if not released:
            return None
        return released[0] if len(released) == 1 else _concatenate(released)

    def _split(self, td: TensorDictBase) -> list[TensorDictBase]:
        done = td.get(self.done_key, None)
        if done is None:
            raise KeyError(
                f"MCAdvantage reads trajectory ends at {self.done_key!r}, which is missing."
            )
        ends = done.reshape(td.shape[0], -1).any(-1).nonzero().flatten().tolist()
        if not ends or ends[-1] != td.shape[0] - 1:
            raise ValueError(
                f"The last step of a batch written through MCAdvantage must end a trajectory "
                f"({self.done_key!r} True): write whole trajectories."
            )
        starts = [0, *[e + 1 for e in ends[:-1]]]
        return [td[s : e + 1] for s, e in zip(starts, ends, strict=True)]

    def _add_trajectory(self, trajectory: TensorDictBase) -> TensorDictBase | None:
        group = _group_id(trajectory[0].get(self.prompt_key))
        trajectory = _materialize(trajectory)
        self._add("completed_trajectories", 1)
        self._add("completed_decisions", trajectory.numel())
        rewards = _step_rewards(trajectory, self.rewards_key)  # a missing entry fails now
        if self.trajectory_return is not None:
            total = float(sum(r.sum() for r in rewards))
            self._add("trajectory_return_sum", total)
            self._stats["trajectory_return_max"] = max(self._stats["trajectory_return_max"], total)
            self._add("successful_trajectories", int(total > 0))
        queue = [*self.queues.get(group, []), trajectory][-self.candidate_group_size :]
        self.queues[group] = queue  # reassigned, so that a shared manager dict sees it
        if self.trajectory_return is None:
            if len(queue) < self.candidate_group_size:
                return None
            del self.queues[group]
            self._add("completed_groups", 1)
            self._add("written_groups", 1)
            return self._per_step(queue, group)
        if len(queue) < self.candidate_selection_min_size:
            return None
        out = self._per_trajectory(queue, group)
        if out is not None or len(queue) == self.candidate_group_size:
            del self.queues[group]
            self._add("completed_groups", 1)
            self._add("written_groups" if out is not None else "dropped_groups", 1)
        return out

    def _normalise(self, values: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
        centred = values - flat.mean()
        return centred / flat.std().clamp_min(self.eps) if self.scale else centred

    def _per_step(self, queue: list[TensorDictBase], group: Any) -> TensorDictBase:
        rewards = [_step_rewards(t, self.rewards_key) for t in queue]
        flat = torch.cat([r.float().reshape(-1) for steps in rewards for r in steps])
        if self.verbose:
            print(f"MCAdvantage: group {group!r} complete, reward mean {flat.mean():.4f}")
        out = []
        for trajectory, steps in zip(queue, rewards, strict=True):
            advantages = [self._normalise(r.float(), flat).to(r.dtype) for r in steps]
            out.append(self._write(trajectory, advantages))
        return _concatenate(out)

    def _per_trajectory(self, queue: list[TensorDictBase], group: Any) -> TensorDictBase | None:
        rewards = [_step_rewards(t, self.rewards_key) for t in queue]
        reduce = {"sum": torch.sum, "max": torch.max, "mean": torch.mean}[self.trajectory_return]
        returns = torch.stack(
            [reduce(torch.cat([r.float().reshape(-1) for r in s])) for s in rewards]
        )
        candidates = TensorDict(
            {"return": returns, "trajectories": lazy_stack(list(queue))}, batch_size=[len(queue)]
        )
        chosen = self.candidate_selector.select(
            candidates.select(*self.candidate_selector.in_keys, strict=True),
            group_size=self.grpo_size,
            keep_return_bounds=self.keep_return_bounds,
        )
        if chosen is None:
            if self.verbose:
                print(f"MCAdvantage: no subset of group {group!r} fits {self.keep_return_bounds}")
            return None
        if len(queue) > self.grpo_size:
            values = returns.tolist()
            self._add(
                "rescued_groups",
                int(not mean_inside(values, list(range(self.grpo_size)), self.keep_return_bounds)),
            )
            self._add("unselected_trajectories", len(queue) - self.grpo_size)
        self._add("selected_trajectories", len(chosen))
        kept = returns[chosen]
        if not mean_inside(kept.tolist(), list(range(len(chosen))), self.keep_return_bounds):
            return None  # a custom selector's pick: dynamic sampling still applies
        advantages = self._normalise(kept, kept)
        if self.verbose:
            print(
                f"MCAdvantage: group {group!r} returns {kept.tolist()} advantages {advantages.tolist()}"
            )
        out = [
            self._write(queue[i], [a.to(r.dtype).expand(r.shape) for r in rewards[i]])
            for i, a in zip(chosen, advantages, strict=True)
        ]
        return _concatenate(out)

    def _write(self, trajectory: TensorDictBase, advantages: list[torch.Tensor]) -> TensorDictBase:
        """``trajectory`` with one advantage per step (stacked, or step by step when ragged)."""
        if all(a.shape == advantages[0].shape for a in advantages):
            trajectory.set(self.advantage_key, torch.stack(advantages))
            return trajectory
        steps = list(trajectory.unbind(0))
        for step, advantage in zip(steps, advantages, strict=True):
            step.set(self.advantage_key, advantage)
        return lazy_stack(steps)
