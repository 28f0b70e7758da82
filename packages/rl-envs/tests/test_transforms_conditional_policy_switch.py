"""ConditionalPolicySwitch: a second policy plays the steps where the condition holds."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Compose,
    Composite,
    ConditionalPolicySwitch,
    EnvBase,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    Unbounded,
)


class Tape(EnvBase):
    """Appends each action to a running sum (``total``) and counts steps (``n``)."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(total=Unbounded(shape=(1,)), n=Unbounded(shape=(1,)))
        self.action_spec = Unbounded(shape=(1,))

    def _reset(self, tensordict, **kwargs):
        self.total, self.n = torch.zeros(1), torch.zeros(1)
        return TensorDict(total=self.total.clone(), n=self.n.clone())

    def _step(self, tensordict):
        self.total = self.total * 10 + tensordict["action"]
        self.n = self.n + 1
        return TensorDict(total=self.total.clone(), n=self.n.clone(), reward=self.n.clone())

    def _set_seed(self, seed):
        return None


def _odd(td):
    return td["step_count"] % 2 == 1


def test_turns_alternate_between_the_two_policies():
    opponent = lambda td: td.set("action", torch.full((1,), 2.0))  # noqa: E731
    env = TransformedEnv(Tape(), Compose(StepCounter(), ConditionalPolicySwitch(opponent, _odd)))
    r = env.rollout(3, policy=lambda td: td.set("action", torch.ones(1)))
    # agent 1, opponent 2, agent 1, opponent 2, ...: digits of the running number
    assert r["next", "total"].flatten().tolist() == [12.0, 1212.0, 121212.0]
    assert r["step_count"].flatten().tolist() == [0, 2, 4]
    assert r["next", "reward"].flatten().tolist() == [2.0, 4.0, 6.0]


def test_reset_lets_the_opponent_open():
    opponent = lambda td: td.set("action", torch.full((1,), 2.0))  # noqa: E731
    env = TransformedEnv(
        Tape(),
        Compose(
            StepCounter(), ConditionalPolicySwitch(opponent, lambda td: td["step_count"] % 2 == 0)
        ),
    )
    td = env.reset()
    assert td["total"].item() == 2.0 and td["step_count"].item() == 1
    assert td.get("reward", None) is None


def test_batched_only_entries_meeting_the_condition_step_again():
    opponent = lambda td: td.set("action", torch.full((2, 1), 2.0))  # noqa: E731
    cond = lambda td: torch.tensor([True, False])  # noqa: E731
    env = TransformedEnv(SerialEnv(2, Tape), ConditionalPolicySwitch(opponent, cond))
    td = env.reset().set("action", torch.ones(2, 1))
    out = env.step(td)["next"]
    # entry 0: the opponent opened at reset (2), then agent 1, opponent 2
    assert out["total"].flatten().tolist() == [212.0, 1.0]


def test_outside_an_env_it_refuses():
    t = ConditionalPolicySwitch(lambda td: td, lambda td: True)
    with pytest.raises(RuntimeError, match="cannot be called independently"):
        Compose(t)(TensorDict())
