import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Bounded,
    Composite,
    DoubleToFloat,
    DTypeCastTransform,
    EnvBase,
    TransformedEnv,
    Unbounded,
    check_env_specs,
)


class DoubleEnv(EnvBase):
    """float64 observation, action and reward; asserts that it receives float64 actions."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(obs=Unbounded(shape=(2,), dtype=torch.float64))
        self.action_spec = Bounded(-1.0, 1.0, shape=(1,), dtype=torch.float64)
        self.reward_spec = Unbounded(shape=(1,), dtype=torch.float64)

    def _reset(self, td):
        return TensorDict(obs=torch.zeros(2, dtype=torch.float64))

    def _step(self, td):
        a = td["action"]
        assert a.dtype == torch.float64
        return TensorDict(
            obs=torch.cat([a, a]), reward=a.clone(), terminated=torch.zeros(1, dtype=torch.bool)
        )

    def _set_seed(self, seed):
        pass


def test_double_to_float_in_env():
    env = TransformedEnv(DoubleEnv(), DoubleToFloat())
    assert env.observation_spec["obs"].dtype == torch.float32
    assert env.reward_spec.dtype == torch.float32
    assert env.action_spec.dtype == torch.float32
    td = env.reset()
    td["action"] = torch.tensor([0.25])
    out = env.step(td)
    assert out["next", "obs"].dtype == torch.float32
    torch.testing.assert_close(out["next", "reward"], torch.tensor([0.25]))
    check_env_specs(env)


def test_explicit_keys_only():
    t = DTypeCastTransform(torch.float64, torch.float32, in_keys=["a"])
    td = t(TensorDict(a=torch.ones(1, dtype=torch.float64), b=torch.ones(1, dtype=torch.float64)))
    assert td["a"].dtype == torch.float32 and td["b"].dtype == torch.float64


def test_scan_without_env():
    td = DoubleToFloat()(
        TensorDict(a=torch.ones(1, dtype=torch.float64), i=torch.ones(1, dtype=torch.int64))
    )
    assert td["a"].dtype == torch.float32 and td["i"].dtype == torch.int64


def test_missing_key_and_bad_args():
    with pytest.raises(KeyError, match="'a'"):
        DoubleToFloat(in_keys=["a"])(TensorDict(b=torch.ones(1)))
    with pytest.raises(ValueError, match="out_keys"):
        DoubleToFloat(out_keys=["x"])
