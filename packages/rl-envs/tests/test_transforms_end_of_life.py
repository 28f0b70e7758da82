"""EndOfLifeTransform: a lost life is flagged as an end of life, not as a done."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Composite,
    EndOfLifeTransform,
    EnvBase,
    TransformedEnv,
    Unbounded,
    check_env_specs,
)


class Lives(EnvBase):
    """Loses a life at steps 2 and 4; the episode ends (done) when no life is left."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(t=Unbounded(shape=(1,)))
        self.action_spec = Unbounded(shape=(1,))
        self.left = 3
        self.t = 0
        self.unwrapped = SimpleNamespace(ale=SimpleNamespace(lives=lambda: self.left))

    def _reset(self, tensordict, **kwargs):
        self.left, self.t = 3, 0
        return TensorDict(t=torch.zeros(1))

    def _step(self, tensordict):
        self.t += 1
        if self.t in (2, 4, 6):
            self.left -= 1
        done = torch.tensor([self.left == 0])
        return TensorDict(
            t=torch.full((1,), float(self.t)), reward=torch.zeros(1), done=done, terminated=done
        )

    def _set_seed(self, seed):
        return None


def test_lost_lives_are_flagged_and_counted():
    env = TransformedEnv(Lives(), EndOfLifeTransform())
    check_env_specs(env)
    r = env.rollout(10)
    assert r.shape == (6,)
    assert r["next", "lives"].tolist() == [3, 2, 2, 1, 1, 0]
    assert r["next", "end-of-life"].flatten().tolist() == [False, True, False, True, False, True]
    assert r["next", "done"].flatten().tolist() == [False] * 5 + [True]
    assert r["lives"][0].item() == 3 and not r["end-of-life"][0].item()


def test_register_keys_and_errors():
    seen = {}
    EndOfLifeTransform().register_keys(SimpleNamespace(set_keys=lambda **kw: seen.update(kw)))
    assert seen == {"done": "end-of-life", "terminated": "end-of-life"}
    with pytest.raises(RuntimeError, match="without a parent env"):
        EndOfLifeTransform().reset(TensorDict(), TensorDict(done=torch.zeros(1, dtype=torch.bool)))
    with pytest.raises(RuntimeError, match="parent environment"):
        EndOfLifeTransform()(TensorDict())
