"""``StepCounter``: counts the steps of each trajectory and truncates at ``max_steps``."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, reset_mask
from rl_envs.transforms.transform import EnvSpecs, Transform


class StepCounter(Transform):
    """Counts steps since the last reset; sets ``truncated`` once ``max_steps`` is reached.

    ``step_count`` (int64, ``[*B, 1]``) is 0 after a reset and grows by one per
    step. With ``max_steps``, ``("next", truncated_key)`` becomes ``True`` when
    the count reaches it, and with ``update_done`` so does ``("next", "done")``
    (``done = terminated | truncated``). A partial reset zeroes only the reset
    entries.

    Multi-agent envs: the count is kept per env at the root (agents of one env
    share their episode). When the env's done spec also holds nested flags (e.g.
    PettingZoo's ``("agents", "truncated")`` / ``("agents", "done")`` of shape
    ``[*B, n_agents, 1]``), truncation is written there too, broadcast over the agent
    dim, so per-agent and team flags agree.

    Args:
        max_steps: the step count at which an episode is truncated (``None``: never).
        truncated_key: the truncation flag to write.
        step_count_key: where the count lives.
        update_done: also set ``"done"`` when truncating.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = StepCounter(max_steps=2)
        >>> root = t._reset(TensorDict(), TensorDict(done=torch.zeros(1, dtype=torch.bool)))
        >>> nxt = TensorDict(done=torch.zeros(1, dtype=torch.bool), truncated=torch.zeros(1, dtype=torch.bool))
        >>> out = t._step(root, nxt)
        >>> out["step_count"], out["truncated"]
        (tensor([1]), tensor([False]))
    """

    def __init__(
        self,
        max_steps: int | None = None,
        truncated_key: str | None = "truncated",
        step_count_key: str | None = "step_count",
        update_done: bool = True,
    ) -> None:
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"StepCounter: max_steps must be >= 1 or None, got {max_steps}.")
        super().__init__()
        self.max_steps = max_steps
        self.truncated_key = truncated_key or "truncated"
        self.step_count_key = step_count_key or "step_count"
        self.update_done = update_done
        self._nested_prefixes: list[tuple[str, ...]] = []  # groups with their own flags

    @property
    def step_count_keys(self) -> list[str]:
        """The step-count entries written (one: the count lives at the root)."""
        return [self.step_count_key]

    @property
    def all_truncated_keys(self) -> list[NestedKey]:
        """The truncation flags set at ``max_steps``: the root one and each group's."""
        return [self.truncated_key, *[(*p, self.truncated_key) for p in self._nested_prefixes]]

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        ref = tensordict_reset.get("done", None)
        shape = (*tensordict_reset.batch_size, 1) if ref is None else ref.shape
        zeros = torch.zeros(shape, dtype=torch.int64, device=tensordict_reset.device)
        mask = reset_mask(tensordict)
        previous = tensordict.get(self.step_count_key, None) if tensordict is not None else None
        if mask is not None and previous is not None:
            zeros = torch.where(mask, zeros, previous)
        tensordict_reset.set(self.step_count_key, zeros)
        if self.max_steps is not None:
            truncated = tensordict_reset.get(self.truncated_key, None)
            if truncated is None:
                tensordict_reset.set(self.truncated_key, torch.zeros(shape, dtype=torch.bool))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        count = tensordict.get(self.step_count_key, None)
        if count is None:
            raise KeyError(
                f"StepCounter: {self.step_count_key!r} is missing from the step's input. "
                "It is written by reset(): reset the env before stepping it, and carry the "
                "root entries over with step_mdp."
            )
        count = count + 1
        next_tensordict.set(self.step_count_key, count)
        if self.max_steps is not None:
            hit = count >= self.max_steps
            truncated = next_tensordict.get(self.truncated_key, None)
            truncated = hit if truncated is None else truncated | hit
            next_tensordict.set(self.truncated_key, truncated)
            if self.update_done:
                done = next_tensordict.get("done", None)
                next_tensordict.set("done", truncated if done is None else done | truncated)
            if self._nested_prefixes and bool(hit.any()):
                self._truncate_groups(next_tensordict, hit)
        return next_tensordict

    def _truncate_groups(self, next_tensordict: TensorDictBase, hit: torch.Tensor) -> None:
        """Broadcasts the root truncation ``hit`` (``[*B, 1]``) to each group's flags."""
        nb = next_tensordict.batch_dims
        for prefix in self._nested_prefixes:
            names = [self.truncated_key, "done"] if self.update_done else [self.truncated_key]
            for name in names:
                flag = next_tensordict.get((*prefix, name), None)
                if flag is None:
                    continue
                h = hit.reshape(*hit.shape[:nb], *([1] * (flag.ndim - nb)))
                next_tensordict.set((*prefix, name), flag | h)

    def _supports_rollout_map(self) -> bool:
        return self.max_steps is None  # truncation changes the rollout itself

    def _rollout_map(self, trajectory: TensorDictBase) -> TensorDictBase:
        nxt = trajectory.get("next")
        done = nxt.get("done")
        time_dim = trajectory.batch_dims - 1
        steps = done.shape[time_dim]
        count = trajectory.get(self.step_count_key, None)
        first = count.narrow(time_dim, 0, 1) if count is not None else 0
        # a done at step t restarts the count at t + 1
        restart = torch.zeros_like(done)
        restart.narrow(time_dim, 1, steps - 1).copy_(done.narrow(time_dim, 0, steps - 1))
        shape = [1] * done.ndim
        shape[time_dim] = steps
        t = torch.arange(steps, device=done.device).reshape(shape).expand_as(done)
        last = torch.cummax(torch.where(restart, t, -1), dim=time_dim).values
        root = torch.where(last >= 0, t - last, first + t)
        trajectory.set(self.step_count_key, root)
        nxt.set(self.step_count_key, root + 1)
        return trajectory

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "StepCounter cannot be called independently: it counts env steps, use it "
            "inside a TransformedEnv. On stored trajectories the count is already in the data."
        )

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        from rl_envs.specs import Bounded, Categorical

        batch = tuple(specs.observation.shape)
        device = specs.observation.device
        high = self.max_steps if self.max_steps is not None else torch.iinfo(torch.int64).max
        count_spec = Bounded(low=0, high=high, shape=(*batch, 1), dtype=torch.int64, device=device)
        specs.observation[self.step_count_key] = count_spec
        specs.state[self.step_count_key] = count_spec.clone()
        self._nested_prefixes = sorted(
            {
                key[:-1]
                for key in specs.done.keys(True, True)
                if isinstance(key, tuple) and len(key) > 1 and key[-1] == self.truncated_key
            }
        )
        if self.max_steps is not None and not _has(specs.done, self.truncated_key):
            specs.done[self.truncated_key] = Categorical(
                n=2, shape=(*batch, 1), dtype=torch.bool, device=device
            )
        return specs

    def extra_repr(self) -> str:
        return f"max_steps={self.max_steps}, step_count_key={self.step_count_key!r}"


def _has(spec: Any, key: str) -> bool:
    return key in set(spec.keys())
