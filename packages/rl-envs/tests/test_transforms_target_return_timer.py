"""TargetReturn (reduce / constant, partial resets), Timer and DeviceCastTransform."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    DeviceCastTransform,
    PendulumEnv,
    TargetReturn,
    Timer,
    TransformedEnv,
    check_env_specs,
)


@pytest.mark.parametrize("mode", ["reduce", "constant"])
def test_target_return_against_a_running_sum(mode: str) -> None:
    env = TransformedEnv(PendulumEnv(batch_size=[2]), TargetReturn(10.0, mode=mode))
    ro = env.rollout(5)
    rewards = ro["next", "reward"]
    spent = torch.cumsum(rewards, dim=1) if mode == "reduce" else torch.zeros_like(rewards)
    assert torch.allclose(ro["next", "target_return"], 10.0 - spent)
    assert torch.allclose(ro["target_return"][:, 0], torch.full((2, 1), 10.0))
    check_env_specs(env)


def test_target_return_partial_reset_keeps_other_entries() -> None:
    env = TransformedEnv(PendulumEnv(batch_size=[2]), TargetReturn(5.0))
    td = env.reset()
    td["action"] = env.action_spec.rand()
    nxt = env.step(td)["next"].exclude("reward")
    nxt["_reset"] = torch.tensor([[True], [False]])
    nxt["done"] = torch.zeros(2, 1, dtype=torch.bool)
    out = env.reset(nxt)
    assert out["target_return"][0].item() == 5.0
    assert out["target_return"][1].item() == nxt["target_return"][1].item() != 5.0


def test_target_return_errors() -> None:
    with pytest.raises(ValueError, match="mode"):
        TargetReturn(1.0, mode="sum")
    with pytest.raises(NotImplementedError, match="inside an env"):
        TargetReturn(1.0)(TensorDict())


def test_timer_writes_positive_step_and_policy_times() -> None:
    env = TransformedEnv(PendulumEnv(), Timer())
    ro = env.rollout(4)
    assert bool((ro["next", "time_step"] > 0).all())
    assert ro["time_policy"][0].item() == 0.0 and bool((ro["time_policy"][1:] > 0).all())
    assert ro["next", "time_reset"].sum().item() == 0.0
    env.reset()
    assert env.reset()["time_reset"].item() > 0
    check_env_specs(env)
    with pytest.raises(TypeError, match="three out_keys"):
        Timer(out_keys=["a"])


def test_device_cast_moves_outputs_and_inputs() -> None:
    t = DeviceCastTransform("meta", "cpu", in_keys=["obs"], in_keys_inv=["act"])
    assert t(TensorDict(obs=torch.zeros(2)))["obs"].device.type == "meta"
    inner_meta = DeviceCastTransform("cpu", "meta", in_keys_inv=["act"])
    assert inner_meta.inv(TensorDict(act=torch.zeros(2)))["act"].device.type == "meta"
    env = TransformedEnv(PendulumEnv(), DeviceCastTransform("cpu"))
    assert env.rollout(3)["next", "observation"].device.type == "cpu"
    check_env_specs(env)
    moved = DeviceCastTransform("meta", "cpu")
    assert moved(TensorDict(a=torch.zeros(1), b=torch.ones(1))).device.type == "meta"
