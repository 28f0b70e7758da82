import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    BinarizeReward,
    PendulumEnv,
    RewardClipping,
    RewardScaling,
    SignTransform,
    TransformedEnv,
    check_env_specs,
)

R = torch.tensor([[-3.0], [0.0], [0.5], [2.0]])


@pytest.mark.parametrize(
    ("transform", "expected"),
    [
        (RewardScaling(loc=1.0, scale=2.0), R * 2 + 1),
        (RewardScaling(loc=1.0, scale=2.0, standard_normal=True), (R - 1) / 2),
        (RewardClipping(-1.0, 1.0), torch.tensor([[-1.0], [0.0], [0.5], [1.0]])),
        (BinarizeReward(), torch.tensor([[0], [0], [1], [1]], dtype=torch.int8)),
        (SignTransform(in_keys=["reward"]), torch.tensor([[-1.0], [0.0], [1.0], [1.0]])),
    ],
)
def test_values(transform, expected):
    out = transform(TensorDict(reward=R.clone(), batch_size=[4]))["reward"]
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize(
    "transform",
    [
        RewardScaling(0.0, 0.1),
        RewardClipping(-1.0, 1.0),
        BinarizeReward(),
        SignTransform(in_keys=["reward"]),
    ],
)
def test_in_env_specs(transform):
    env = TransformedEnv(PendulumEnv(batch_size=[2]), transform)
    check_env_specs(env)


def test_clipping_spec_and_errors():
    env = TransformedEnv(PendulumEnv(), RewardClipping(-1.0, 0.5))
    assert env.reward_spec.space.high.max().item() == 0.5
    with pytest.raises(ValueError, match="clamp_min"):
        RewardClipping(1.0, 0.0)
    with pytest.raises(KeyError, match="'reward'"):
        BinarizeReward()(TensorDict(obs=torch.zeros(1)))


def test_sign_on_actions():
    t = SignTransform(in_keys_inv=["action"])
    torch.testing.assert_close(
        t.inv(TensorDict(action=torch.tensor([-0.3])))["action"], torch.tensor([-1.0])
    )
