"""TorchRL's class-level spec form: ``cls._output_spec`` / ``cls._input_spec`` set before ``__init__``."""

import torch
from tensordict import TensorDict

from rl_envs import Bounded, Composite, EnvBase, Unbounded, check_env_specs


class _ClassSpecEnv(EnvBase):
    def __new__(cls, *args, size: int = 3, **kwargs):  # TorchRL's mocks pass their args on
        cls._output_spec = Composite(
            full_observation_spec=Composite(observation=Unbounded((size,))),
            full_reward_spec=Composite(reward=Unbounded((1,))),
            full_done_spec=Composite(
                done=Unbounded((1,), dtype=torch.bool), terminated=Unbounded((1,), dtype=torch.bool)
            ),
        )
        cls._input_spec = Composite(full_action_spec=Composite(action=Bounded(-1.0, 1.0, (2,))))
        return super().__new__(cls, *args, **kwargs)

    def __init__(self, size: int = 3):
        super().__init__(allow_done_after_reset=False)
        self.size = size

    def _reset(self, td):
        return TensorDict(observation=torch.zeros(self.size), done=torch.zeros(1, dtype=torch.bool),
                          terminated=torch.zeros(1, dtype=torch.bool))  # fmt: skip

    def _step(self, td):
        return TensorDict(observation=torch.ones(self.size), reward=torch.ones(1),
                          done=torch.zeros(1, dtype=torch.bool),
                          terminated=torch.zeros(1, dtype=torch.bool))  # fmt: skip

    def _set_seed(self, seed):
        return None


def test_class_level_specs_become_the_instance_specs():
    env = _ClassSpecEnv(size=4)
    assert env.observation_spec["observation"].shape == (4,)
    assert env.action_spec.shape == (2,) and set(env.full_done_spec.keys()) == {
        "done",
        "terminated",
    }
    check_env_specs(env)
    other = _ClassSpecEnv(size=2)  # each instance keeps its own copy
    assert env.observation_spec["observation"].shape == (4,)
    assert other.observation_spec["observation"].shape == (2,)
    assert env.allow_done_after_reset is False
