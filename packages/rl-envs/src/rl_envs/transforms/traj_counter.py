"""``TrajCounter``: numbers trajectories with a counter shared by every copy of the transform."""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing import context as mp_context
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.specs import Bounded
from rl_envs.transforms._utils import NestedKey, as_key_list, spec_has
from rl_envs.transforms.transform import EnvSpecs, Transform


class TrajCounter(Transform):
    """Writes ``traj_count``: the index of the trajectory each step belongs to.

    Every reset (of each env of a batch) takes the next number of one counter, which
    ``clone()`` copies share, and so do the copies sent to the worker processes of a
    ``ParallelEnv`` or collector when they start: no two envs ever hold the same
    trajectory number. Steps carry the number of their trajectory.

    Args:
        out_key: the entry (default ``"traj_count"``); a nested key counts the resets of
            the done flags under the same prefix.
        repeats: kept for TorchRL parity (unused).

    Example:
        >>> from rl_envs import PendulumEnv, StepCounter, TransformedEnv, Compose
        >>> env = TransformedEnv(PendulumEnv(), Compose(StepCounter(max_steps=2), TrajCounter()))
        >>> env.rollout(6, break_when_any_done=False)["traj_count"].squeeze(-1).tolist()
        [0, 0, 1, 1, 2, 2]
    """

    def __init__(self, out_key: NestedKey = "traj_count", *, repeats: int | None = None) -> None:
        super().__init__()
        self.out_keys = as_key_list(out_key)
        self.repeats = 0 if repeats is None else repeats
        self._traj_count = mp.Value("q", 0)

    # ------------------------------------------------------------- sharing
    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        if mp_context.get_spawning_popen() is None:  # a plain copy / pickle: a new counter
            state["_traj_count"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if self.__dict__.get("_traj_count") is None:
            self.__dict__["_traj_count"] = mp.Value("q", 0)

    def clone(self) -> TrajCounter:
        out = super().clone()
        out.__dict__["_traj_count"] = self._traj_count  # clones count together
        return out

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {"traj_count": int(self._traj_count.value)}

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        with self._traj_count.get_lock():
            self._traj_count.value = int(state_dict["traj_count"])

    # ---------------------------------------------------------------- data
    def _reset_key(self) -> NestedKey:
        key = self.out_keys[0]
        return "_reset" if isinstance(key, str) else (*key[:-1], "_reset")

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        key = self.out_keys[0]
        ref = tensordict_reset.get("done", None)
        shape = ref.shape if ref is not None else (*tensordict_reset.batch_size, 1)
        mask = tensordict.get(self._reset_key(), None) if tensordict is not None else None
        if mask is None:
            mask = torch.ones(shape, dtype=torch.bool, device=tensordict_reset.device)
        mask = mask.reshape(shape).bool()
        n = int(mask.sum())
        with self._traj_count.get_lock():
            first = int(self._traj_count.value)
            self._traj_count.value = first + n
        fresh = torch.arange(first, first + n, device=mask.device)
        previous = tensordict.get(key, None) if tensordict is not None else None
        base = torch.zeros(shape, dtype=torch.int64, device=mask.device)
        if previous is not None and previous.shape == base.shape:
            base = previous.to(torch.int64).clone()
        tensordict_reset.set(key, base.masked_scatter(mask, fresh))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        count = tensordict.get(self.out_keys[0], None)
        if count is None:
            raise RuntimeError("TrajCounter: the env was stepped before it was reset.")
        next_tensordict.set(self.out_keys[0], count)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError("TrajCounter can only be called within an environment step or reset.")

    _call = forward

    # --------------------------------------------------------------- specs
    def _done_shape(self, done_spec: Any) -> torch.Size:
        key = self.out_keys[0]
        done_key = "done" if isinstance(key, str) else (*key[:-1], "done")
        if not spec_has(done_spec, done_key):
            raise KeyError(
                f"TrajCounter: no done flag {done_key!r} matches the prefix of {key!r}; the "
                f"env's done keys are {list(done_spec.keys(True, True))}."
            )
        return done_spec[done_key].shape

    def _count_spec(self, shape: torch.Size, device: Any) -> Any:
        return Bounded(
            low=0, high=torch.iinfo(torch.int64).max, shape=shape, dtype=torch.int64, device=device
        )

    def transform_observation_spec(self, observation_spec: Any) -> Any:
        parent = self.parent
        if parent is None:
            raise RuntimeError("TrajCounter.transform_observation_spec needs the env it sits in.")
        shape = self._done_shape(parent.full_done_spec)
        observation_spec[self.out_keys[0]] = self._count_spec(shape, observation_spec.device)
        return observation_spec

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        shape = self._done_shape(specs.done)
        specs.observation[self.out_keys[0]] = self._count_spec(shape, specs.observation.device)
        return specs

    def extra_repr(self) -> str:
        return f"out_key={self.out_keys[0]!r}, count={int(self._traj_count.value)}"
