"""FrameSkipTransform, NoopResetEnv, TerminateTransform, TimeMaxPool."""

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Composite,
    EnvBase,
    FrameSkipTransform,
    NoopResetEnv,
    SerialEnv,
    StepCounter,
    TerminateTransform,
    TimeMaxPool,
    TransformedEnv,
    Unbounded,
    check_env_specs,
)


class CountEnv(EnvBase):
    """obs = number of steps since reset; reward = obs; truncated at ``horizon``."""

    def __init__(self, horizon=100):
        super().__init__()
        self.horizon = horizon
        self.observation_spec = Composite(obs=Unbounded(shape=(1,)))
        self.action_spec = Unbounded(shape=(1,))
        self.t = 0

    def _reset(self, td):
        self.t = 0
        return TensorDict(obs=torch.zeros(1))

    def _step(self, td):
        self.t += 1
        obs = torch.tensor([float(self.t)])
        return TensorDict(
            obs=obs,
            reward=obs.clone(),
            terminated=torch.zeros(1, dtype=torch.bool),
            truncated=torch.tensor([self.t >= self.horizon]),
        )

    def _set_seed(self, seed):
        pass


def test_frame_skip_sums_rewards_and_stops_at_done():
    env = TransformedEnv(CountEnv(horizon=5), FrameSkipTransform(2))
    r = env.rollout(10)
    assert r["next", "obs"].squeeze(-1).tolist() == [2.0, 4.0, 5.0]
    assert r["next", "reward"].squeeze(-1).tolist() == [1.0 + 2.0, 3.0 + 4.0, 5.0]
    check_env_specs(env)


def test_noop_reset_runs_noops():
    env = TransformedEnv(CountEnv(), StepCounter())
    env.append_transform(NoopResetEnv(noops=3, random=False))
    td = env.reset()
    assert td["obs"].item() == 3.0 and td["step_count"].item() == 3
    torch.manual_seed(0)
    env2 = TransformedEnv(CountEnv(), NoopResetEnv(noops=4, random=True))
    values = {env2.reset()["obs"].item() for _ in range(30)}
    assert values <= {1.0, 2.0, 3.0, 4.0} and len(values) > 1
    assert TransformedEnv(CountEnv(), NoopResetEnv(noops=0)).reset()["obs"].item() == 0.0


def test_noop_reset_refuses_a_batched_env():
    env = TransformedEnv(SerialEnv(2, CountEnv), NoopResetEnv(noops=2))
    with pytest.raises(ValueError, match="batch-size is non-null"):
        env.reset()


def test_terminate_transform():
    env = TransformedEnv(CountEnv(), TerminateTransform(lambda td: td["obs"] >= 3))
    r = env.rollout(10)
    assert r.shape[-1] == 3
    assert r["next", "terminated"].squeeze(-1).tolist() == [False, False, True]
    with pytest.raises(TypeError, match="callable"):
        TerminateTransform(3)


def test_time_max_pool():
    class Wave(CountEnv):
        def _step(self, td):
            out = super()._step(td)
            out["obs"] = torch.tensor([float([5, 1, 2, 7, 0][self.t - 1])])
            return out

    env = TransformedEnv(Wave(), TimeMaxPool(in_keys=["obs"], T=2))
    r = env.rollout(5)
    assert r["next", "obs"].squeeze(-1).tolist() == [5.0, 5.0, 2.0, 7.0, 7.0]


def test_env_stepping_transforms_get_their_inner_env_from_the_env():
    """FrameSkip / NoopReset step the env beneath them, handed over by the TransformedEnv
    (the base env and the transforms before them), and lose it when taken out."""
    counter, skip = StepCounter(), FrameSkipTransform(2)
    env = TransformedEnv(CountEnv(horizon=50), counter)
    assert skip.inner_env is None
    env.append_transform(skip)
    inner = skip.inner_env
    assert inner.base_env is env.base_env and inner.transforms == [counter]
    assert counter.inner_env is None  # only transforms that step the env get one
    env.rollout(3)
    assert env.transform.pop() is skip and skip.inner_env is None
    assert skip.clone().inner_env is None
    env.insert_transform(0, skip)  # now first: nothing before it
    assert skip.inner_env.transforms == []
