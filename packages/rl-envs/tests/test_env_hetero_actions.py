"""An env whose agents act in spaces of different sizes: the action spec holds a lazy stack."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from rl_envs import Bounded, Composite, EnvBase, Unbounded


class _TwoSizedAgents(EnvBase):
    """Agent 0 acts in 3 dims, agent 1 in 2; the observation is the sum of all actions."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        agents = [
            Composite(action=Bounded(-1.0, 1.0, shape=(3,))),
            Composite(action=Bounded(-1.0, 1.0, shape=(2,))),
        ]
        self.action_spec = Composite(lazy=torch.stack(agents, 0))
        self.observation_spec = Composite(observation=Unbounded((1,)))
        self.reward_spec = Unbounded((1,))

    def _reset(self, tensordict):
        return TensorDict(observation=torch.zeros(1))

    def _step(self, tensordict):
        total = sum(td["action"].sum() for td in tensordict["lazy"].tensordicts)
        return TensorDict(
            observation=total.reshape(1),
            reward=torch.ones(1),
            terminated=torch.zeros(1, dtype=torch.bool),
        )

    def _set_seed(self, seed):
        pass


def _actions(values: tuple[float, float]) -> LazyStackedTensorDict:
    return LazyStackedTensorDict.lazy_stack(
        [
            TensorDict(action=torch.full((3,), values[0])),
            TensorDict(action=torch.full((2,), values[1])),
        ]
    )


@pytest.mark.parametrize("validate_actions", [False, True])
def test_step_reads_actions_of_different_sizes_from_a_lazy_stack(validate_actions: bool) -> None:
    env = _TwoSizedAgents()
    env.validate_actions = validate_actions
    assert env.action_keys == [("lazy", "action")]
    td = env.reset()
    td.set("lazy", _actions((0.5, -0.25)))
    out = env.step(td)
    torch.testing.assert_close(out["next", "observation"], torch.tensor([0.5 * 3 - 0.25 * 2]))
