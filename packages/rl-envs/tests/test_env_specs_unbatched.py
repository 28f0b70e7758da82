"""The ``*_spec_unbatched`` setters prepend the batch dims (TorchRL's behaviour)."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rl_envs import Bounded, Composite, EnvBase, Unbounded


class Batched(EnvBase):
    """Batch (2,) whose observation is (2,) too: the batched setter cannot tell them apart."""

    def __init__(self) -> None:
        super().__init__(batch_size=(2,))
        self.observation_spec_unbatched = Composite(observation=Unbounded(shape=(2,)))
        self.action_spec_unbatched = Bounded(-1.0, 1.0, shape=(1,))

    def _reset(self, td):
        return TensorDict(observation=torch.zeros(2, 2), batch_size=[2])

    def _step(self, td):
        return TensorDict(observation=torch.ones(2, 2), reward=torch.zeros(2, 1), batch_size=[2])

    def _set_seed(self, seed):
        pass


def test_unbatched_setters_prepend_batch_dims() -> None:
    env = Batched()
    assert env.observation_spec["observation"].shape == (2, 2)
    assert env.observation_spec_unbatched["observation"].shape == (2,)
    assert env.action_spec.shape == (2, 1) and env.action_spec_unbatched.shape == (1,)
    env.reward_spec_unbatched = Unbounded(shape=(1,))
    assert env.reward_spec.shape == (2, 1)
    env.full_state_spec_unbatched = Composite(hidden=Unbounded(shape=(2,)))
    assert env.full_state_spec["hidden"].shape == (2, 2)
    assert env.rollout(3).batch_size == (2, 3)
