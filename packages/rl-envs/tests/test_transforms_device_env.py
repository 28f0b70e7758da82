"""The device a TransformedEnv reports through DeviceCastTransform (TorchRL's rule)."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rl_envs import DeviceCastTransform, PendulumEnv, StepCounter, TransformedEnv


def test_casting_everything_moves_the_env_device():
    env = TransformedEnv(PendulumEnv(), DeviceCastTransform("cpu:1"))
    assert env.device == torch.device("cpu:1")
    assert env.transform.orig_device == torch.device("cpu")
    assert env.full_observation_spec["observation"].device == torch.device("cpu:1")
    env.append_transform(StepCounter())
    assert env.device == torch.device("cpu:1")


def test_casting_some_keys_leaves_the_env_without_one_device():
    env = TransformedEnv(PendulumEnv(), DeviceCastTransform("cpu:1", in_keys=["observation"]))
    assert env.device is None
    assert env.transform.orig_device == torch.device("cpu")
    env.transform = DeviceCastTransform("cpu")
    assert env.device == torch.device("cpu")


def test_partial_cast_clears_the_tensordict_device():
    t = DeviceCastTransform("meta", "cpu", in_keys=["a"], out_keys=["b"])
    out = t._call(TensorDict(a=torch.zeros(()), device="cpu"))
    assert out.device is None
    assert out["b"].device.type == "meta" and out["a"].device.type == "cpu"
