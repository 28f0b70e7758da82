"""Envs that reset themselves: SomeEnv(auto_reset=True) -> AutoResetEnv + AutoResetTransform.

The toy env counts steps and starts the next episode inside the step that ends one
(it returns the next episode's first observation with done=True), as vectorised
simulators do; expected trajectories are written out by hand.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    AutoResetEnv,
    AutoResetTransform,
    Composite,
    EnvBase,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    Unbounded,
)


class _SelfResetting(EnvBase):
    """obs = steps taken in the episode; ends after ``length`` steps and restarts at 0."""

    def __init__(self, length: int = 3, dtype: torch.dtype = torch.float32, **kwargs):
        super().__init__(**kwargs)
        self.length = length
        self.observation_spec = Composite(observation=Unbounded((1,), dtype=dtype))
        self.action_spec = Unbounded((1,))
        self.dtype = dtype
        self.resets = 0

    def _reset(self, tensordict):
        if tensordict is not None and tensordict.get("_reset", None) is not None:
            raise AssertionError("an auto-resetting env is never partially reset")
        self.resets += 1
        self.n = 0
        return TensorDict(observation=torch.zeros(1, dtype=self.dtype))

    def _step(self, tensordict):
        self.n += 1
        done = self.n == self.length
        obs = torch.full((1,), self.n, dtype=self.dtype)
        if done:
            self.n = 0
            obs = torch.zeros(1, dtype=self.dtype)
        return TensorDict(observation=obs, reward=torch.ones(1), terminated=torch.tensor([done]))

    def _set_seed(self, seed):
        pass


def test_constructor_keyword_wraps_the_env():
    env = _SelfResetting(auto_reset=True)
    assert type(env) is AutoResetEnv
    assert isinstance(env.transform, AutoResetTransform)
    assert type(env.base_env) is _SelfResetting and env.base_env.length == 3
    assert type(_SelfResetting()) is _SelfResetting


@pytest.mark.parametrize(
    ("dtype", "fill"), [(torch.float32, float("nan")), (torch.int64, -1), (torch.bool, False)]
)
def test_final_observation_is_filled_and_next_episode_starts_at_reset(dtype, fill):
    env = _SelfResetting(length=3, dtype=dtype, auto_reset=True)
    r = env.rollout(7, break_when_any_done=False)
    nxt = r["next", "observation"].flatten()
    root = r["observation"].flatten()
    done = r["next", "done"].flatten()
    assert done.tolist() == [False, False, True, False, False, True, False]
    expected_next = [1, 2, fill, 1, 2, fill, 1]
    expected_root = [0, 1, 2, 0, 1, 2, 0]
    if dtype is torch.bool:
        expected_next = [bool(v) for v in expected_next]
        expected_root = [bool(v) for v in expected_root]
    torch.testing.assert_close(nxt, torch.tensor(expected_next, dtype=dtype), equal_nan=True)
    torch.testing.assert_close(root, torch.tensor(expected_root, dtype=dtype))
    assert env.base_env.resets == 1  # the first reset only: the env restarted itself


def test_replace_false_keeps_what_the_env_returned():
    env = _SelfResetting(length=2, auto_reset=True, auto_reset_replace=False)
    r = env.rollout(4, break_when_any_done=False)
    assert r["next", "observation"].flatten().tolist() == [1.0, 0.0, 1.0, 0.0]


def test_break_when_any_done_stops_at_the_first_done():
    env = _SelfResetting(length=3, auto_reset=True)
    r = env.rollout(10)
    assert r.shape == (3,) and r["next", "done"].sum() == 1 and not r["done"].any()


def test_outer_transforms_see_the_reset():
    env = TransformedEnv(_SelfResetting(length=2, auto_reset=True), StepCounter())
    assert type(env.base_env) is AutoResetEnv  # a subclass is not unwrapped
    r = env.rollout(5, break_when_any_done=False)
    assert r["step_count"].flatten().tolist() == [0, 1, 0, 1, 0]


def test_batched_auto_reset_envs():
    env = SerialEnv(2, [lambda: _SelfResetting(2, auto_reset=True),
                        lambda: _SelfResetting(3, auto_reset=True)])  # fmt: skip
    r = env.rollout(6, break_when_any_done=False)
    assert r["observation"][0].flatten().tolist() == [0, 1, 0, 1, 0, 1]
    assert r["observation"][1].flatten().tolist() == [0, 1, 2, 0, 1, 2]


def test_full_reset_discards_what_a_done_step_kept():
    env = _SelfResetting(length=1, auto_reset=True)
    td = env.reset()
    td["action"] = torch.zeros(1)
    env.step(td)  # done: the transform keeps the next episode's first observation
    env.base_env.n = 0
    assert env.reset()["observation"].item() == 0.0
    assert env.base_env.resets == 2


def test_misuse_raises():
    env = _SelfResetting(auto_reset=True)
    with pytest.raises(RuntimeError, match="Cannot insert a transform"):
        env.insert_transform(0, StepCounter())
    bad = TransformedEnv(_SelfResetting(length=1), AutoResetTransform())
    td = bad.reset().set("action", torch.zeros(1))
    with pytest.raises(RuntimeError, match="must be the transform of an AutoResetEnv"):
        bad.step(td)
