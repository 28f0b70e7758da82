import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    CatTensors,
    FlattenObservation,
    PendulumEnv,
    TransformedEnv,
    UnsqueezeTransform,
    check_env_specs,
)


def test_unsqueeze_and_inverse():
    env = TransformedEnv(
        PendulumEnv(batch_size=[2]),
        UnsqueezeTransform(-1, in_keys=["observation"], in_keys_inv=["action"]),
    )
    assert env.observation_spec["observation"].shape == (2, 3, 1)
    assert env.action_spec.shape == (2, 1, 1)
    td = env.reset()
    td["action"] = torch.zeros(2, 1, 1)
    out = env.step(td)
    assert out["next", "observation"].shape == (2, 3, 1)
    check_env_specs(env)
    with pytest.raises(ValueError, match="negative"):
        UnsqueezeTransform(0)


def test_flatten_observation():
    x = torch.arange(24.0).reshape(2, 3, 4)
    out = FlattenObservation(-2, -1, in_keys=["obs"])(TensorDict(obs=x, batch_size=[2]))["obs"]
    torch.testing.assert_close(out, x.reshape(2, 12))


def test_cat_tensors():
    td = TensorDict(
        b=torch.ones(2, 2), a=torch.zeros(2, 1), s=torch.full((2,), 5.0), batch_size=[2]
    )
    out = CatTensors(["b", "a", "s"], "vec", unsqueeze_if_oor=True)(td)
    torch.testing.assert_close(out["vec"], torch.tensor([[0.0, 1.0, 1.0, 5.0]] * 2))
    assert set(out.keys()) == {"vec"}
    with pytest.raises(KeyError, match="'a'"):
        CatTensors(["a", "b"], "vec")(TensorDict(b=torch.zeros(1)))


def test_cat_tensors_spec_in_env():
    env = TransformedEnv(PendulumEnv(), CatTensors(["observation"], "vec", del_keys=True))
    assert env.observation_spec["vec"].shape == (3,)
    assert "observation" not in env.observation_spec
    check_env_specs(env)
