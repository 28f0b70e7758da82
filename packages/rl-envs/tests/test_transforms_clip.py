"""ClipTransform: clamps outputs and inputs; clipped output specs become Bounded."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import Bounded, ClipTransform, GymEnv, TransformedEnv, Unbounded, check_env_specs


def test_clip_values_and_inverse() -> None:
    t = ClipTransform(in_keys=["obs"], in_keys_inv=["act"], low=-1, high=0.1)
    x = torch.tensor([-3.0, 0.0, 3.0])
    assert torch.equal(t(TensorDict(obs=x.clone()))["obs"], torch.tensor([-1.0, 0.0, 0.1]))
    assert torch.equal(t.inv(TensorDict(act=x.clone()))["act"], torch.tensor([-1.0, 0.0, 0.1]))
    only_high = ClipTransform(in_keys=["obs"], high=0.0)
    assert torch.equal(only_high(TensorDict(obs=x.clone()))["obs"], torch.tensor([-3.0, 0.0, 0.0]))


def test_clip_spec_is_bounded_with_resolution_margin() -> None:
    t = ClipTransform(in_keys=["obs"], low=-1, high=0.1)
    spec = t.transform_observation_spec(Unbounded(shape=(2,)))
    eps = torch.finfo(torch.float32).resolution
    assert isinstance(spec, Bounded)
    assert torch.allclose(spec.space.low, torch.full((2,), -1 - eps))
    assert torch.allclose(spec.space.high, torch.full((2,), 0.1 + eps))


def test_clip_in_env() -> None:
    env = TransformedEnv(
        GymEnv("Pendulum-v1"), ClipTransform(in_keys=["observation"], low=-1, high=0.1)
    )
    ro = env.rollout(20)
    assert bool((ro["observation"] <= 0.1).all()) and bool((ro["next", "observation"] >= -1).all())
    check_env_specs(env)


def test_clip_errors() -> None:
    with pytest.raises(TypeError, match=r"high.*low"):
        ClipTransform(in_keys=["obs"])
    with pytest.raises(ValueError, match="strictly lower"):
        ClipTransform(in_keys=["obs"], low=1, high=0)
    with pytest.raises(TypeError, match="scalar"):
        ClipTransform(in_keys=["obs"], low=torch.zeros(2))
