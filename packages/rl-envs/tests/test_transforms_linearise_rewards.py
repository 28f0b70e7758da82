"""LineariseRewards: weighted sums of multi-objective rewards, and the bounds of its spec."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Bounded,
    EnvBase,
    LineariseRewards,
    TransformedEnv,
    Unbounded,
    check_env_specs,
)


class TwoObjectives(EnvBase):
    """Rewards (x, -x) with x in [0, 1]: a two-objective reward of bounds [0, 1] x [-1, 0]."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_spec = Unbounded(shape=(1,))
        self.action_spec = Bounded(0.0, 1.0, shape=(1,))
        self.reward_spec = Bounded(torch.tensor([0.0, -1.0]), torch.tensor([1.0, 0.0]))

    def _reset(self, td):
        return TensorDict(observation=torch.zeros(1))

    def _step(self, td):
        x = td["action"]
        return TensorDict(observation=x.clone(), reward=torch.cat([x, -x]))

    def _set_seed(self, seed):
        pass


def test_weighted_sum_and_spec_bounds() -> None:
    env = TransformedEnv(TwoObjectives(), LineariseRewards(in_keys=["reward"], weights=[2.0, 1.0]))
    spec = env.reward_spec
    assert spec.shape == (1,)
    assert spec.space.low.item() == -1.0 and spec.space.high.item() == 2.0  # 2*[0,1] + [-1,0]
    ro = env.rollout(4)
    x = ro["action"]
    torch.testing.assert_close(ro["next", "reward"], 2 * x - x)
    check_env_specs(env)


def test_default_weights_and_errors() -> None:
    t = LineariseRewards(in_keys=["r"])
    assert t(TensorDict(r=torch.tensor([1.0, 2.0, 3.0])))["r"].tolist() == [6.0]
    assert t.transform_reward_spec(Unbounded(shape=(3,))).shape == (1,)
    with pytest.raises(ValueError, match="1-d weights"):
        LineariseRewards(in_keys=["r"], weights=torch.ones(2, 2))
    with pytest.raises(ValueError, match="should match"):
        LineariseRewards(in_keys=["r"], weights=[1.0])(TensorDict(r=torch.ones(2)))
