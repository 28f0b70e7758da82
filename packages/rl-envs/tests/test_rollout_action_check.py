"""Out-of-spec actions: passed to the env by default with one warning per env instance
(TorchRL's behaviour); ``validate_actions=True`` checks every rollout step and raises."""

from __future__ import annotations

import warnings
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
    env = ENVS[name](validate_actions=True)
    with pytest.raises(ValueError, match=r"rollout step 5: Action entry 'action' is outside"):
        env.rollout(8, OutOfRangeAt(env, bad_step=5), break_when_any_done=False)


@pytest.mark.parametrize("name", sorted(ENVS))
def test_validate_actions_false_lets_it_through(name: str) -> None:
    env = ENVS[name](validate_actions=False)
    with pytest.warns(UserWarning, match="outside its spec.*passed to the env as is"):
        out = env.rollout(8, OutOfRangeAt(env, bad_step=5), break_when_any_done=False)
    assert out.get("action")[..., 5, :].max() == 10.0


@pytest.mark.parametrize("name", sorted(ENVS))
def test_default_passes_out_of_spec_actions_and_warns_once_per_instance(name: str) -> None:
    env = ENVS[name]()
    assert env.validate_actions is False
    with pytest.warns(UserWarning, match="Shown once per env instance") as caught:
        out = env.rollout(8, OutOfRangeAt(env, bad_step=5), break_when_any_done=False)
    assert len([w for w in caught if "outside its spec" in str(w.message)]) == 1
    assert out.get("action")[..., 5, :].max() == 10.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same instance does not warn again
        env.rollout(8, OutOfRangeAt(env, bad_step=2), break_when_any_done=False)
    with pytest.warns(UserWarning, match="outside its spec"):  # a new instance does
        other = ENVS[name]()
        other.rollout(8, OutOfRangeAt(other, bad_step=1), break_when_any_done=False)


def test_step_passes_out_of_spec_action_and_gymnasium_clips_it() -> None:
    env = GymEnv("Pendulum-v1")
    env.set_seed(0)
    td = env.reset()
    td["action"] = torch.tensor([10.0])
    with pytest.warns(UserWarning, match="outside its spec"):
        out = env.step(td)
    ref = GymEnv("Pendulum-v1")  # Pendulum clips the torque to 2: same transition
    ref.set_seed(0)
    td_ref = ref.reset()
    td_ref["action"] = torch.tensor([2.0])
    assert torch.equal(out["next", "observation"], ref.step(td_ref)["next", "observation"])
    assert torch.equal(out["next", "reward"], td_ref["next", "reward"])


def test_in_spec_actions_never_warn() -> None:
    env = PendulumEnv(batch_size=[2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.rollout(5, break_when_any_done=False)
        td = env.reset()
        td["action"] = env.action_spec.rand()
        env.step(td)
