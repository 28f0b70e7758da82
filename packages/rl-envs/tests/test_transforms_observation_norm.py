import pytest
import torch
from tensordict import TensorDict

from rl_envs import Bounded, ObservationNorm, PendulumEnv, TransformedEnv, check_env_specs


@pytest.mark.parametrize("standard_normal", [False, True])
def test_affine_map(standard_normal):
    x = torch.tensor([[1.0, -2.0], [3.0, 4.0]])
    t = ObservationNorm(loc=0.5, scale=2.0, in_keys=["obs"], standard_normal=standard_normal)
    out = t(TensorDict(obs=x.clone(), batch_size=[2]))["obs"]
    expected = (x - 0.5) / 2.0 if standard_normal else x * 2.0 + 0.5
    torch.testing.assert_close(out, expected)


def test_inverse_on_inputs():
    t = ObservationNorm(
        loc=1.0, scale=4.0, in_keys=[], in_keys_inv=["action"], standard_normal=True
    )
    out = t.inv(TensorDict(action=torch.tensor([0.5])))
    torch.testing.assert_close(out["action"], torch.tensor([3.0]))


def test_init_stats_standardises_rollouts():
    env = TransformedEnv(PendulumEnv(batch_size=[4]), ObservationNorm(in_keys=["observation"]))
    env.set_seed(0)
    torch.manual_seed(0)
    env.transform.init_stats(num_iter=200, reduce_dim=(0, 1))
    base = PendulumEnv(batch_size=[4])
    base.set_seed(0)
    torch.manual_seed(0)
    raw = base.rollout(200, break_when_any_done=False)["observation"]
    mean, std = raw.mean((0, 1)), raw.std((0, 1))
    # independent closed form: loc = -mean/std, scale = 1/std
    torch.testing.assert_close(env.transform.loc, -mean / std)
    torch.testing.assert_close(env.transform.scale, 1 / std)
    env.set_seed(0)
    torch.manual_seed(0)
    out = env.rollout(200, break_when_any_done=False)["observation"]
    torch.testing.assert_close(out.mean((0, 1)), torch.zeros(3), atol=1e-4, rtol=0)
    check_env_specs(env)


def test_bounded_spec_is_mapped():
    env = TransformedEnv(
        PendulumEnv(), ObservationNorm(loc=1.0, scale=-2.0, in_keys=["observation"])
    )
    spec = env.observation_spec["observation"]
    assert isinstance(spec, Bounded)
    torch.testing.assert_close(spec.space.low, torch.tensor([-1.0, -1.0, -15.0]))
    torch.testing.assert_close(spec.space.high, torch.tensor([3.0, 3.0, 17.0]))


def test_errors():
    t = ObservationNorm(loc=0.0, scale=1.0, in_keys=["obs"])
    with pytest.raises(KeyError, match="'obs'"):
        t(TensorDict(other=torch.zeros(1)))
    with pytest.raises(RuntimeError, match="init_stats"):
        ObservationNorm(in_keys=["obs"])(TensorDict(obs=torch.zeros(1)))
    with pytest.raises(RuntimeError, match="TransformedEnv"):
        ObservationNorm(in_keys=["obs"]).init_stats(5)


def test_error_messages_follow_torchrl():
    # The phrases TorchRL 0.14 raises, so that code matching on them keeps working.
    with pytest.raises(RuntimeError, match="Loc/Scale have not been initialized"):
        ObservationNorm(in_keys=["obs"])(TensorDict(obs=torch.zeros(1)))
    with pytest.raises(RuntimeError, match="Loc/Scale are already initialized"):
        ObservationNorm(loc=0.0, scale=1.0, in_keys=["obs"]).init_stats(5)
    with pytest.raises(RuntimeError, match="parent env is not defined"):
        ObservationNorm(in_keys=["obs"]).init_stats(5)
    norm = ObservationNorm(in_keys=["observation", "th"])
    TransformedEnv(PendulumEnv(), norm)
    with pytest.raises(ValueError, match="multiple in_keys but no specific key"):
        norm.init_stats(5)
