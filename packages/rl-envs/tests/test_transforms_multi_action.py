"""MultiAction: a stack of actions executed one base step each, stopping at done."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Compose,
    Composite,
    EnvBase,
    MultiAction,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    Unbounded,
    check_env_specs,
)


class Adder(EnvBase):
    """``count += action``; reward = the new count; done once count >= limit."""

    def __init__(self, limit=100.0, batch_size=()):
        super().__init__(batch_size=batch_size)
        b = tuple(batch_size)
        self.observation_spec = Composite(count=Unbounded(shape=(*b, 1)), shape=b)
        self.action_spec = Unbounded(shape=(*b, 1))
        self.limit = limit
        self.count = torch.zeros(*b, 1)

    def _reset(self, tensordict, **kwargs):
        self.count = torch.zeros(*self.batch_size, 1)
        return TensorDict(count=self.count.clone(), batch_size=self.batch_size)

    def _step(self, tensordict):
        self.count = self.count + tensordict["action"]
        done = self.count >= self.limit
        return TensorDict(
            count=self.count.clone(),
            reward=self.count.clone(),
            done=done,
            terminated=done,
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        return None


def _env(**kwargs):
    return TransformedEnv(
        Adder(**kwargs),
        Compose(
            StepCounter(step_count_key="inner"), MultiAction(), StepCounter(step_count_key="outer")
        ),
    )


def test_each_action_is_one_base_step_and_rewards_stack():
    env = _env()
    check_env_specs(env)
    chunk = torch.tensor([[1.0], [2.0], [3.0]])
    r = env.rollout(2, policy=lambda td: td.set("action", chunk.clone()))
    assert r["action"].shape == (2, 3, 1)
    assert r["next", "count"].flatten().tolist() == [6.0, 12.0]
    # reward of each base step: the running count (1, 3, 6 then 7, 9, 12)
    assert r["next", "reward"].squeeze(-1).tolist() == [[1.0, 3.0, 6.0], [7.0, 9.0, 12.0]]
    assert r["next", "inner"].flatten().tolist() == [3, 6]
    assert r["next", "outer"].flatten().tolist() == [1, 2]


def test_done_inside_the_chunk_stops_and_leaves_one_zero_slot():
    env = _env(limit=3.0)
    td = env.reset().set("action", torch.ones(4, 1) * 2.0)
    out = env.step(td)["next"]
    assert out["count"].item() == 4.0  # 2, then 4 >= 3: done, two actions skipped
    assert out["done"].item()
    assert out["reward"].squeeze(-1).tolist() == [2.0, 4.0, 0.0]


def test_batched_entries_stop_independently():
    base = SerialEnv(2, [lambda: Adder(limit=2.0), lambda: Adder(limit=100.0)])
    env = TransformedEnv(base, MultiAction())
    td = env.reset().set("action", torch.ones(2, 4, 1))
    out = env.step(td)["next"]
    assert out["count"].flatten().tolist() == [2.0, 4.0]
    assert out["reward"].squeeze(-1).tolist() == [[1.0, 2.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0]]
    assert out["done"].flatten().tolist() == [True, False]


def test_chunk_key_stack_observations_and_errors():
    env = TransformedEnv(
        Adder(), MultiAction(action_key="action", chunk_key="plan", stack_observations=True)
    )
    keys = set(env.full_action_spec.keys())
    assert "plan" in keys and "action" not in keys
    td = env.reset().set("plan", torch.ones(2, 1))
    out = env.step(td)
    assert out["next", "count"].squeeze(-1).tolist() == [1.0, 2.0]
    with pytest.raises(KeyError, match=r"MultiAction\.from_vla"):
        env.step(env.reset())
    with pytest.raises(ValueError, match="dim"):
        MultiAction(dim=0)
    with pytest.raises(RuntimeError, match="TransformedEnv"):
        MultiAction().inv(TensorDict(action=torch.ones(2, 1)))
