"""ToyVLAEnv: the VLA observation layout, echo and tracking modes, partial steps; and
check_env_specs on non-tensor (string) observations."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import SerialEnv, ToyVLAEnv, check_env_specs


def test_echo_mode_layout_and_reward():
    env = ToyVLAEnv(batch_size=[2], seed=0)
    td = env.reset()
    assert td["observation", "image"].shape == (2, 3, 16, 16)
    assert td["observation", "image"].dtype == torch.uint8
    assert td["language_instruction"][1] == "push the T-shaped block onto the target"
    assert (td["observation", "state"] == 0).all()
    action = torch.tensor([[0.3, -0.4, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    nxt = env.step(td.set("action", action))["next"]
    torch.testing.assert_close(nxt["observation", "state"][:, :4], action)
    torch.testing.assert_close(nxt["reward"], torch.tensor([[-0.5], [-1.0]]))
    assert not nxt["done"].any()
    same = ToyVLAEnv(batch_size=[2], seed=0).reset()["observation", "image"]
    assert torch.equal(same, td["observation", "image"])
    assert not torch.equal(ToyVLAEnv(batch_size=[2], seed=1).reset()["observation", "image"], same)


def test_tracking_oracle_succeeds_after_k_steps():
    env = ToyVLAEnv(action_dim=2, state_dim=4, success_steps=3, batch_size=[4], seed=0)
    td = env.reset()
    target = td["observation", "state"][:, 2:4]
    assert (target.abs() <= 0.5).all()
    for k in range(3):
        nxt = env.step(td.set("action", target + 0.2))["next"]  # inside the 0.25 box
        torch.testing.assert_close(nxt["reward"], torch.full((4, 1), -(0.08**0.5)))
        assert nxt["success"].all() == (k == 2) and nxt["terminated"].all() == (k == 2)
        td = nxt
    miss = ToyVLAEnv(action_dim=2, state_dim=4, success_steps=1, batch_size=[4], seed=0)
    td = miss.reset()
    out = miss.step(td.set("action", td["observation", "state"][:, 2:4] + 0.3))["next"]
    assert not out["success"].any()


def test_partial_step_freezes_the_others():
    env = ToyVLAEnv(action_dim=2, state_dim=4, success_steps=2, batch_size=[2], seed=0)
    td = env.reset()
    oracle = td["observation", "state"][:, 2:4]
    td = env.step(td.set("action", oracle))["next"]
    td.set("action", oracle + 0.1).set("_step", torch.tensor([True, False]))
    nxt = env.step(td)["next"]
    assert nxt["success"].squeeze(-1).tolist() == [True, False]
    assert nxt["reward"][1].item() == 0.0


def test_argument_checks():
    with pytest.raises(ValueError, match="state_dim"):
        ToyVLAEnv(action_dim=5, state_dim=3)
    with pytest.raises(ValueError, match="state_dim"):
        ToyVLAEnv(action_dim=4, state_dim=6, success_steps=2)
    with pytest.raises(ValueError, match="success_steps"):
        ToyVLAEnv(action_dim=2, state_dim=4, success_steps=0)
    with pytest.raises(ValueError, match="success_tol"):
        ToyVLAEnv(action_dim=2, state_dim=4, success_steps=2, success_tol=0.6)


@pytest.mark.parametrize("batch_size", [(), (3,)])
def test_check_env_specs_sees_non_tensor_entries(batch_size):
    check_env_specs(ToyVLAEnv(batch_size=batch_size, seed=0))
    check_env_specs(ToyVLAEnv(action_dim=2, state_dim=4, success_steps=2, batch_size=batch_size))

    class Mute(ToyVLAEnv):  # declares the instruction but does not write it
        def _step(self, td):
            return super()._step(td).exclude("language_instruction")

    with pytest.raises(AssertionError, match="language_instruction"):
        check_env_specs(Mute(batch_size=batch_size))


def test_serial_env_keeps_each_worker_instruction():
    env = SerialEnv(
        2,
        [
            lambda: ToyVLAEnv(action_dim=2, state_dim=2, instruction="pick the apple"),
            lambda: ToyVLAEnv(action_dim=2, state_dim=2, instruction="pick the pear"),
        ],
    )
    rollout = env.rollout(3)
    assert rollout["language_instruction"][0][0] == "pick the apple"
    assert rollout["language_instruction"][1][2] == "pick the pear"
    env.close()
    td = TensorDict(batch_size=[])
    assert ToyVLAEnv().reset(td)["language_instruction"] == ToyVLAEnv().instruction
