"""A policy whose actions leave the action box: collectors pass them to the env (TorchRL).

The env (here Pendulum, which clips the torque to [-2, 2]) decides; the collector adds
no check of its own on any path. ``validate_actions=True`` on the env opts into the error.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tensordict import TensorDictBase
from torch import nn

from rl_collectors import Collector
from rl_envs import PendulumEnv


class ConstantPolicy(nn.Module):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        return td.set("action", torch.full((*td.batch_size, 1), self.value))


def _collect(value: float, use_env_rollout: bool, **env_kwargs: Any) -> TensorDictBase:
    env = PendulumEnv(batch_size=[2], **env_kwargs)
    env.set_seed(0)
    collector = Collector(
        env, ConstantPolicy(value), frames_per_batch=20, total_frames=40,
        use_env_rollout=use_env_rollout,
    )  # fmt: skip
    return torch.cat(list(collector), dim=1)


@pytest.mark.parametrize("use_env_rollout", [True, False])
def test_out_of_box_actions_reach_the_env_which_clips_them(use_env_rollout: bool) -> None:
    with pytest.warns(UserWarning, match="outside its spec"):
        outside = _collect(5.0, use_env_rollout)
    edge = _collect(2.0, use_env_rollout)
    assert (outside["action"] == 5.0).all(), "the collector stores the policy's action as is"
    # Pendulum clips the torque: the trajectory is the one of the bound.
    assert torch.equal(outside["next", "observation"], edge["next", "observation"])
    assert torch.allclose(outside["next", "reward"], edge["next", "reward"])


def test_validate_actions_opts_into_the_error() -> None:
    with pytest.raises(ValueError, match="action"):
        _collect(5.0, use_env_rollout=True, validate_actions=True)
