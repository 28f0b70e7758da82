"""register_gym: rl_envs envs as Gymnasium envs (spaces from specs, the 5-tuple step)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rl_envs import Bounded, Categorical, Composite, EnvBase, StepCounter, Unbounded

gym = pytest.importorskip("gymnasium")


class Echo(EnvBase):
    """observation = action, reward = sum(action); ("other", "x") holds zeros."""

    def __init__(self, scale=1.0):
        super().__init__()
        self.scale = scale
        self.observation_spec = Composite(
            observation=Unbounded((3,)), other=Composite(x=Unbounded((3,)))
        )
        self.action_spec = Bounded(-1.0, 1.0, shape=(3,))

    def _reset(self, td):
        return TensorDict(observation=torch.zeros(3), other=TensorDict(x=torch.zeros(3)))

    def _step(self, td):
        a = td["action"] * self.scale
        return TensorDict(
            observation=a.clone(),
            other=TensorDict(x=torch.zeros(3)),
            reward=a.sum(-1, True),
            terminated=torch.zeros(1, dtype=torch.bool),
        )

    def _set_seed(self, seed):
        pass


@pytest.mark.parametrize("to_numpy", [True, False])
def test_registered_env_steps_through_gymnasium(to_numpy):
    Echo.register_gym(f"RlEnvsEcho-{to_numpy}-v0", to_numpy=to_numpy, info_keys=("other",))
    env = gym.make(f"RlEnvsEcho-{to_numpy}-v0", scale=2.0)
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    obs, info = env.reset(seed=0)
    assert set(obs) == {"observation"} and set(info) == {"other"}
    obs, reward, terminated, truncated, info = env.step(np.full(3, 0.5, dtype=np.float32))
    kind = np.ndarray if to_numpy else torch.Tensor
    assert isinstance(obs["observation"], kind) and isinstance(info["other"]["x"], kind)
    np.testing.assert_allclose(np.asarray(obs["observation"]), np.full(3, 1.0))  # scale 2
    assert float(reward[0]) == 3.0 and not bool(terminated[0]) and not bool(truncated[0])


def test_transform_and_spaces():
    Echo.register_gym("RlEnvsEchoSteps-v0", transform=StepCounter())
    env = gym.make("RlEnvsEchoSteps-v0")
    assert "step_count" in env.observation_space.spaces
    env.reset()
    obs, *_ = env.step(env.action_space.sample())
    assert obs["step_count"].item() == 1
    from rl_envs.libs.gym_export import spec_to_space

    assert spec_to_space(Categorical(4, shape=())) == gym.spaces.Discrete(4)
    with pytest.raises(ValueError, match="only Gymnasium"):
        Echo.register_gym("RlEnvsEchoGym-v0", backend="gym")
