"""``rollout`` checks the actions of every step (not only the first) while ``validate_actions``."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tensordict import TensorDictBase

from rl_envs import GymEnv, PendulumEnv


class OutOfRangeAt:
    """Writes an in-range action, then an out-of-range one at step ``bad_step``."""

    def __init__(self, env: Any, bad_step: int) -> None:
        self.spec, self.bad_step, self.calls = env.action_spec, bad_step, 0

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        action = torch.zeros(self.spec.shape, dtype=self.spec.dtype)
        if self.calls == self.bad_step:
            action = action + 10.0  # Pendulum's torque bound is 2
        self.calls += 1
        td.set("action", action)
        return td


ENVS = {
    "gym (fast loop)": lambda **kw: GymEnv("Pendulum-v1", **kw),
    "batched torch env (generic loop)": lambda **kw: PendulumEnv(batch_size=[2], **kw),
}


@pytest.mark.parametrize("name", sorted(ENVS))
def test_out_of_spec_action_at_a_later_step_raises_naming_it(name: str) -> None:
    env = ENVS[name]()
    with pytest.raises(ValueError, match=r"rollout step 5: Action entry 'action' is outside"):
        env.rollout(8, OutOfRangeAt(env, bad_step=5), break_when_any_done=False)


@pytest.mark.parametrize("name", sorted(ENVS))
def test_validate_actions_false_lets_it_through(name: str) -> None:
    env = ENVS[name](validate_actions=False)
    out = env.rollout(8, OutOfRangeAt(env, bad_step=5), break_when_any_done=False)
    assert out.get("action")[..., 5, :].max() == 10.0
