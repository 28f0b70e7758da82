import pytest
import torch
from tensordict import TensorDict

from rl_envs import Composite, SuccessReward, TransformedEnv, Unbounded
from rl_envs.pendulum import PendulumEnv


def test_reward_is_scale_times_success():
    success = torch.tensor([[True], [False], [True]])
    out = SuccessReward(scale=-0.5)(TensorDict(success=success, batch_size=[3]))
    torch.testing.assert_close(out["reward"], success.float() * -0.5)
    spec = SuccessReward(scale=-0.5).transform_reward_spec(
        Composite(reward=Unbounded(shape=(3, 1)), shape=(3,))
    )
    assert spec["reward"].space.low.min() == -0.5 and spec["reward"].space.high.max() == 0.0
    with pytest.raises(RuntimeError, match="could not infer"):
        SuccessReward().transform_reward_spec(Composite())


def test_in_an_env_the_step_reward_comes_from_success():
    class Success(PendulumEnv):
        def _reset(self, td=None, **kwargs):
            return super()._reset(td, **kwargs).set("success", torch.zeros(1, dtype=torch.bool))

        def _step(self, td):
            out = super()._step(td)
            return out.set("success", out["reward"] > -1.0)

    base = Success()
    base.observation_spec["success"] = Unbounded(shape=(1,), dtype=torch.bool)
    env = TransformedEnv(base, SuccessReward(scale=2.0))
    assert env.reward_spec.space.high.item() == 2.0
    assert "reward" not in env.reset()
    r = env.rollout(5)
    torch.testing.assert_close(r["next", "reward"], r["next", "success"].float() * 2.0)
