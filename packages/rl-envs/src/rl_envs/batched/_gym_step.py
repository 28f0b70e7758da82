"""A numpy step for Gymnasium sub-envs of SerialEnv / ParallelEnv (private).

``GymWrapper._step`` builds a TensorDict per step (a few microseconds per entry).
Inside a batched env the result is copied into preallocated buffers right away,
so for a plain Gymnasium env (one env, not a vector env) this stepper skips the
TensorDict: the action is read from a numpy view of the input buffer, and the
observation, reward and flags are written into numpy views of the output buffer.
It produces exactly what ``GymWrapper._step`` would (tested against it), and is
used only where that holds: any other env goes through the generic path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_envs.batched._layout import NestedKey


def gym_stepper(env: Any, td_in: TensorDictBase, dst: list[tuple[NestedKey, torch.Tensor]]):
    """A ``GymStepper`` for ``env`` if the fast path applies, else ``None``.

    It applies to exactly ``GymEnv`` / ``GymWrapper`` (the classes whose own body sets
    ``fast_batched_step``; a subclass may override ``_step``: it gets the generic path) over
    a single env on CPU with one top-level ``Box`` action.
    """
    if not vars(type(env)).get("fast_batched_step", False) or env.device.type != "cpu":
        return None
    binding = env.binding
    if binding.is_vector or not binding.single_plain_action:
        return None
    leaf = binding.action_leaves[0]
    if not binding.is_box(leaf):
        return None
    keys = {_t(k) for k, _ in dst}
    read_keys = {reader.key for reader in binding.readers}
    if keys != read_keys | {("reward",), ("terminated",), ("truncated",), ("done",)}:
        return None
    return GymStepper(binding, td_in, dst, leaf)


def _t(key: NestedKey) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)


class GymStepper:
    """Steps one Gymnasium env from / into numpy views of the exchange buffers."""

    def __init__(self, binding: Any, td_in: TensorDictBase, dst: list, leaf: Any) -> None:
        self.binding = binding
        self.action = td_in.get(leaf.key).numpy()
        self.gym_dtype = leaf.space.dtype
        views = {_t(k): v for k, v in dst}
        self.reward = views[("reward",)].numpy()
        self.terminated = views[("terminated",)].numpy()
        self.truncated = views[("truncated",)].numpy()
        self.done = views[("done",)].numpy()
        self.obs = [(views[r.key].numpy(), r.read, r.offset) for r in binding.readers]

    def step(self) -> bool:
        """One step; returns whether the episode ended."""
        action = self.action
        action = action.astype(self.gym_dtype) if action.dtype != self.gym_dtype else action.copy()
        obs, reward, term, trunc, info = self.binding.step(action)
        for view, read, offset in self.obs:
            view[...] = read(obs, info)
            if offset:
                view -= offset
        self.reward[...] = np.float32(reward)
        self.terminated[...] = bool(term)
        self.truncated[...] = bool(trunc)
        ended = bool(term) or bool(trunc)
        self.done[...] = ended
        return ended
