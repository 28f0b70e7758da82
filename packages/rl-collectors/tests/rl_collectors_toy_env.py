"""A tiny batched env in plain torch, honouring docs/contract.md, for the collector tests.

Observation ``[*B, 3]`` = (step within the episode, sub-env index, episode number).
Action ``[*B, 1]`` in [-1, 1]; reward = action. Sub-env ``i`` terminates after
``min_len + (3 * i + 5 * episode) % span`` steps (variable lengths) and is
truncated at ``truncate_at`` steps if that comes first.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn


class BoxSpec:
    """Duck-typed continuous action spec: ``shape``, ``dtype``, ``device``, ``rand``."""

    def __init__(self, shape: tuple[int, ...], low: float = -1.0, high: float = 1.0) -> None:
        self.shape = torch.Size(shape)
        self.dtype = torch.float32
        self.device = torch.device("cpu")
        self.low, self.high = low, high

    def rand(self, shape: tuple[int, ...] = ()) -> torch.Tensor:
        u = torch.rand((*shape, *self.shape), dtype=self.dtype)
        return self.low + (self.high - self.low) * u


class ToyEnv:
    """Batched counting env with variable episode lengths, termination, truncation, partial resets."""

    def __init__(
        self,
        batch_size: tuple[int, ...] = (),
        min_len: int = 3,
        span: int = 4,
        truncate_at: int | None = None,
        fail_after: int | None = None,
        hard_exit_after: int | None = None,
        step_delay: float = 0.0,
    ) -> None:
        self.batch_size = torch.Size(batch_size)
        self.device = torch.device("cpu")
        self.action_spec = BoxSpec((*self.batch_size, 1))
        self.min_len, self.span, self.truncate_at = min_len, span, truncate_at
        self.fail_after, self.hard_exit_after = fail_after, hard_exit_after
        self.step_delay = step_delay
        n = self.batch_size.numel()
        self._index = torch.arange(n, dtype=torch.float32).reshape(self.batch_size)
        self._step = torch.zeros(self.batch_size, dtype=torch.int64)
        self._episode = torch.full(self.batch_size, -1, dtype=torch.int64)
        self._done = torch.ones((*self.batch_size, 1), dtype=torch.bool)
        self.total_steps = 0
        self.closed = False

    def _length(self) -> torch.Tensor:
        return self.min_len + (3 * self._index.long() + 5 * self._episode) % self.span

    def _obs(self) -> torch.Tensor:
        return torch.stack([self._step.float(), self._index, self._episode.float()], -1)

    def _flags(self, term: torch.Tensor, trunc: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"done": term | trunc, "terminated": term, "truncated": trunc}

    def reset(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        if tensordict is not None and tensordict.get("_reset", None) is not None:
            mask = tensordict.get("_reset").reshape(self.batch_size)
        else:
            mask = torch.ones(self.batch_size, dtype=torch.bool)
        self._step = torch.where(mask, torch.zeros_like(self._step), self._step)
        self._episode = torch.where(mask, self._episode + 1, self._episode)
        self._done = self._done & ~mask.unsqueeze(-1)
        zeros = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        flags = self._flags(zeros, zeros)
        if tensordict is not None and tensordict.get("_reset", None) is not None:
            # Entries that are not reset keep their current flags.
            for key in flags:
                if tensordict.get(key, None) is not None:
                    flags[key] = torch.where(mask.unsqueeze(-1), zeros, tensordict.get(key))
        return TensorDict({"observation": self._obs(), **flags}, batch_size=self.batch_size)

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._done.any():
            raise RuntimeError("ToyEnv: stepping a done sub-env without reset.")
        self.total_steps += 1
        if self.step_delay:
            time.sleep(self.step_delay)
        if self.fail_after is not None and self.total_steps > self.fail_after:
            raise ValueError("ToyEnv failure injected for the crash test")
        if self.hard_exit_after is not None and self.total_steps > self.hard_exit_after:
            os._exit(3)
        action = tensordict.get("action")
        if action.shape != (*self.batch_size, 1):
            raise ValueError(f"ToyEnv: action of shape {tuple(action.shape)}")
        self._step = self._step + 1
        term = (self._step >= self._length()).unsqueeze(-1)
        trunc = torch.zeros_like(term)
        if self.truncate_at is not None:
            trunc = (self._step >= self.truncate_at).unsqueeze(-1) & ~term
        flags = self._flags(term, trunc)
        self._done = flags["done"].clone()
        nxt = TensorDict(
            {"observation": self._obs(), "reward": action.clone(), **flags},
            batch_size=self.batch_size,
        )
        tensordict.set("next", nxt)
        return tensordict

    def close(self) -> None:
        self.closed = True


class ToyEnvWithStepAndMaybeReset(ToyEnv):
    """Same env, offering ``step_and_maybe_reset`` itself (as rl_envs' EnvBase does)."""

    def step_and_maybe_reset(
        self, tensordict: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        tensordict = self.step(tensordict)
        nxt = tensordict.get("next").exclude("reward")
        done = nxt.get("done")
        if done.any():
            nxt = self.reset(nxt.clone(False).set("_reset", done))
        return tensordict, nxt


class LabelledToyEnv(ToyEnv):
    """Same env (batch ``()``), with a string entry ``"label"``: ``"reset"`` after a reset,
    ``"step <n>"`` after the n-th step of an episode."""

    def reset(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        return super().reset(tensordict).set_non_tensor("label", "reset")

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        tensordict = super().step(tensordict)
        tensordict.get("next").set_non_tensor("label", f"step {int(self._step)}")
        return tensordict


def make_labelled_toy_env() -> LabelledToyEnv:
    """Picklable constructor of :class:`LabelledToyEnv` for the multiprocess tests."""
    return LabelledToyEnv(())


class ToyEnvWithDoneKeys(ToyEnv):
    """Same env, declaring its done keys (TorchRL's ``done_keys``), truncated included."""

    done_keys = ("done", "terminated", "truncated")


def make_toy_env_with_done_keys(**kwargs: object) -> ToyEnvWithDoneKeys:
    """Picklable constructor of :class:`ToyEnvWithDoneKeys` for the multiprocess tests."""
    return ToyEnvWithDoneKeys(**kwargs)


class StatefulToyEnv(ToyEnv):
    """Same env, able to save and restore its exact state (``get_state`` / ``set_state``)."""

    def get_state(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k).clone() for k in ("_step", "_episode", "_done")}

    def set_state(self, state: dict[str, torch.Tensor]) -> None:
        for key, value in state.items():
            setattr(self, key, value.clone())


class SeededToyEnv(ToyEnv):
    """A ToyEnv with ``set_seed``: the seed shows in the observation (``100 * seed`` added
    to the sub-env index column) and seeding resets the env, as Gymnasium's does."""

    seed_value = 0

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        self.seed_value = seed
        self.reset()
        return seed if static_seed else seed + 1

    def _obs(self) -> torch.Tensor:
        obs = super()._obs()
        obs[..., 1] += 100 * self.seed_value
        return obs


def make_toy_env(**kwargs: object) -> ToyEnv:
    """Picklable constructor used by the multiprocess and Ray tests."""
    return ToyEnv(**kwargs)


def make_toy_env_after_a_stack(**kwargs: object) -> ToyEnv:
    """Stacks two TensorDicts in the worker first (tensordict 0.14 reads LAZY_LEGACY_OP there)."""
    torch.stack([TensorDict({"x": torch.zeros(1)}, [1])] * 2)
    return ToyEnv(**kwargs)


def make_toy_env_with_a_child_process(**kwargs: object) -> ToyEnv:
    """Starts (and joins) a process first, as a ParallelEnv built in a collector worker does:
    a daemonic worker may not have children."""
    child = multiprocessing.get_context("fork").Process(target=int)
    child.start()
    child.join()
    return ToyEnv(**kwargs)


class ScalePolicy(nn.Module):
    """Deterministic policy: ``action = clamp(weight * step / 10, -1, 1)``; weight starts at ``init``."""

    def __init__(self, init: float = 0.0) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.tensor(float(init)))

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        step = tensordict.get("observation")[..., :1]
        tensordict.set("action", (self.weight * step / 10).clamp(-1, 1))
        return tensordict


class PrivateOutputPolicy(ScalePolicy):
    """ScalePolicy that also writes private entries, as an exploration module's noise state."""

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        tensordict = super().forward(tensordict)
        tensordict.set("_noise", torch.zeros_like(tensordict.get("action")))
        tensordict.set(("out", "_state"), torch.zeros_like(tensordict.get("action")))
        tensordict.set(("out", "kept"), torch.ones_like(tensordict.get("action")))
        return tensordict


def reference_rollout(env: ToyEnv, policy: nn.Module, steps: int) -> TensorDictBase:
    """A plain loop (reset, act, step, reset the done ones, stack): what a collector must match."""
    root = env.reset()
    out = []
    with torch.no_grad():
        for _ in range(steps):
            root = policy(root)
            transition = env.step(root)
            out.append(transition.clone())
            nxt = transition.get("next").exclude("reward")
            done = nxt.get("done")
            if done.any():
                nxt = env.reset(nxt.clone().set("_reset", done))
            root = nxt
    return torch.stack(out, -1)


class WorkerOnlyScalePolicyFactory:
    """Builds a ``ScalePolicy(init)``; refuses to run in the main process (a factory
    must be called in the workers only)."""

    def __init__(self, init: float = 0.0) -> None:
        self.init = init

    def __call__(self) -> ScalePolicy:
        if multiprocessing.parent_process() is None:
            raise AssertionError("the policy factory was called in the main process")
        return ScalePolicy(self.init)


def as_python_list(value: Any) -> Any:
    """A collected non-tensor entry as nested Python lists (tensordict 0.14 returns its own
    list type, 0.15 a ``NonTensorStack``)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return [as_python_list(v) if isinstance(v, list) else v for v in value]
