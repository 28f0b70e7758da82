"""Reward2GoTransform against a plain python loop over episodes."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import PendulumEnv, Reward2GoTransform, TransformedEnv


def python_reward_to_go(rewards: list[float], dones: list[bool], gamma: float) -> list[float]:
    out, g = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        g = rewards[t] + (0.0 if dones[t] else gamma * g)
        out[t] = g
    return out


def test_matches_python_loop_per_row() -> None:
    torch.manual_seed(0)
    reward = torch.randn(3, 7, 1)
    done = torch.rand(3, 7, 1) < 0.3
    done[:, -1] = True
    td = TensorDict(
        next=TensorDict(reward=reward.clone(), done=done, batch_size=[3, 7]), batch_size=[3, 7]
    )
    t = Reward2GoTransform(gamma=0.9, out_keys=[("next", "r2g")])
    out = t.inv(td)
    for b in range(3):
        ref = python_reward_to_go(reward[b, :, 0].tolist(), done[b, :, 0].tolist(), 0.9)
        torch.testing.assert_close(out["next", "r2g"][b, :, 0], torch.tensor(ref))
    assert torch.equal(out["next", "reward"], reward)  # the input rewards are kept
    assert t(td) is td  # sampling: identity


def test_errors() -> None:
    no_end = TensorDict(
        next=TensorDict(
            reward=torch.ones(1, 3, 1),
            done=torch.zeros(1, 3, 1, dtype=torch.bool),
            batch_size=[1, 3],
        ),
        batch_size=[1, 3],
    )
    with pytest.raises(RuntimeError, match="no episode end"):
        Reward2GoTransform().inv(no_end)
    with pytest.raises(ValueError, match="not inside an env"):
        TransformedEnv(PendulumEnv(), Reward2GoTransform())


def test_env_err_is_a_class_attribute_usable_as_a_pattern():
    # TorchRL code matches on ``Reward2GoTransform.ENV_ERR``: it must match the raised message.
    with pytest.raises(ValueError, match=Reward2GoTransform.ENV_ERR):
        TransformedEnv(PendulumEnv(), Reward2GoTransform(gamma=0.9))


def test_missing_reward_names_the_keys():
    t = Reward2GoTransform(gamma=0.9, in_keys=["other"], out_keys=["r2g"])
    td = TensorDict({("next", "done"): torch.ones(3, 1, dtype=torch.bool)}, batch_size=[3])
    with pytest.raises(KeyError, match="Could not find any of the input keys"):
        t.inv(td)
