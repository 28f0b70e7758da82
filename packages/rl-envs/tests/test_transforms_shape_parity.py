"""SqueezeTransform, PermuteTransform, Crop and transforms applied to a bare (non-Composite) spec."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Bounded,
    Crop,
    PendulumEnv,
    PermuteTransform,
    SqueezeTransform,
    TransformedEnv,
    Unbounded,
    UnsqueezeTransform,
    check_env_specs,
)


def test_squeeze_transform_data_inverse_and_specs() -> None:
    t = SqueezeTransform(-1, in_keys=["obs"], in_keys_inv=["act"])
    td = t(TensorDict(obs=torch.arange(3.0).reshape(3, 1)))
    assert torch.equal(td["obs"], torch.arange(3.0))
    assert t.inv(TensorDict(act=torch.ones(2)))["act"].shape == (2, 1)
    spec = t.transform_observation_spec(Bounded(-1.0, 2.0, shape=(3, 1)))
    assert spec.shape == (3,) and spec.space.high.max().item() == 2.0
    env = TransformedEnv(PendulumEnv(), UnsqueezeTransform(-1, in_keys=["observation"]))
    env.append_transform(SqueezeTransform(-1, in_keys=["observation"]))
    assert env.observation_spec["observation"].shape == (3,)
    check_env_specs(env)


def test_permute_transform_and_its_inverse() -> None:
    x = torch.randn(2, 4, 5, 3)
    t = PermuteTransform((-1, -3, -2), in_keys=["pixels"], in_keys_inv=["pixels"])
    out = t(TensorDict(pixels=x.clone(), batch_size=[2]))["pixels"]
    assert torch.equal(out, x.permute(0, 3, 1, 2))
    back = t.inv(TensorDict(pixels=out, batch_size=[2]))["pixels"]
    assert torch.equal(back, x)
    assert t.transform_observation_spec(Unbounded(shape=(4, 5, 3))).shape == (3, 4, 5)
    with pytest.raises(ValueError, match="trailing dims"):
        PermuteTransform((0, 1))


def test_crop_window_and_spec() -> None:
    img = torch.arange(2 * 5 * 6.0).reshape(2, 5, 6)
    out = Crop(3, 2, top=1, left=2, in_keys=["pixels"])(TensorDict(pixels=img))["pixels"]
    assert torch.equal(out, img[:, 1:4, 2:4])  # w rows, h columns, as TorchRL
    spec = Crop(2, in_keys=["pixels"]).transform_observation_spec(Unbounded(shape=(3, 5, 6)))
    assert spec.shape == (3, 2, 2)
    with pytest.raises(ValueError, match="does not fit"):
        Crop(7, in_keys=["pixels"])(TensorDict(pixels=img))


def test_bare_spec_goes_through_transform_observation_spec() -> None:
    spec = UnsqueezeTransform(-1, in_keys=["x"]).transform_observation_spec(Unbounded(shape=(3,)))
    assert spec.shape == (3, 1)
