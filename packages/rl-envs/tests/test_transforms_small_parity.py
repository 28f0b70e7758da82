"""Small TorchRL-parity behaviours of transforms: gSDENoise, lazy CatTensors, moves."""

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    CatTensors,
    Compose,
    Composite,
    EnvBase,
    PinMemoryTransform,
    RewardScaling,
    TensorDictPrimer,
    TransformedEnv,
    Unbounded,
    gSDENoise,
)


class TwoObs(EnvBase):
    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(
            b=Unbounded(shape=(2,)), a=Unbounded(shape=(3,)), img=Unbounded(shape=(2, 2))
        )
        self.action_spec = Unbounded(shape=(1,))

    def _reset(self, td):
        return TensorDict(a=torch.arange(3.0), b=torch.tensor([7.0, 8.0]), img=torch.zeros(2, 2))

    def _step(self, td):
        out = self._reset(td)
        out.set("reward", torch.zeros(1))
        out.set("done", torch.zeros(1, dtype=torch.bool))
        return out

    def _set_seed(self, seed):
        return seed


def test_gsde_noise_draws_a_matrix_or_writes_a_placeholder():
    td = gSDENoise(state_dim=4, action_dim=3, shape=(2,))(TensorDict())
    assert td["_eps_gSDE"].shape == (2, 3, 4) and (td["_eps_gSDE"] != 0).all()
    td = gSDENoise()(TensorDict())
    assert torch.equal(td["_eps_gSDE"], torch.zeros(1))


def test_cat_tensors_without_in_keys_takes_the_envs_vector_observations():
    env = TransformedEnv(TwoObs(), CatTensors(out_key="vec"))
    assert env.transform.in_keys == ["a", "b"]
    assert torch.equal(env.reset()["vec"], torch.tensor([0.0, 1.0, 2.0, 7.0, 8.0]))
    assert "img" in env.observation_spec
    with pytest.raises(RuntimeError, match="in_keys"):
        CatTensors()(TensorDict(a=torch.zeros(1)))
    with pytest.raises(ValueError, match="dim must be -1"):
        CatTensors(dim=-2)


def test_transforms_of_a_free_compose_move_but_not_those_of_an_env():
    free = Compose(RewardScaling(0.0, 2.0))
    moved = Compose(*free)
    assert moved[0].container is moved
    env = TransformedEnv(TwoObs(), moved)
    with pytest.raises(RuntimeError, match="clone"):
        Compose(env.transform[0])


def test_an_empty_primer_adds_nothing():
    env = TransformedEnv(TwoObs(), TensorDictPrimer())
    assert set(env.reset().keys()) == set(TwoObs().reset().keys())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_pin_memory_without_cuda_says_so():
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        PinMemoryTransform()(TensorDict(a=torch.zeros(2)))


def test_inv_leaves_the_callers_tensordict_alone():
    from rl_envs import DoubleToFloat

    td = TensorDict(action=torch.zeros(2), obs=torch.zeros(2, dtype=torch.float64))
    out = DoubleToFloat(in_keys_inv=["action"]).inv(td)
    assert out["action"].dtype == torch.float64 and td["action"].dtype == torch.float32
    auto = DoubleToFloat().inv(td)  # outside an env: every float32 leaf goes back
    assert auto["action"].dtype == torch.float64 and td["action"].dtype == torch.float32


def test_compose_spec_hooks_chain_their_transforms():
    from rl_envs import Bounded, DoubleToFloat, RenameTransform

    spec = Composite(obs=Bounded(0.0, 1.0, shape=(2,), dtype=torch.float64))
    out = Compose(DoubleToFloat(in_keys=["obs"]), RenameTransform(["obs"], ["o"]))
    out = out.transform_observation_spec(spec)
    assert out["o"].dtype == torch.float32  # renamed after the cast


def test_time_max_pool_outside_an_env_pools_over_calls():
    from rl_envs import TimeMaxPool

    torch.manual_seed(0)
    frames = [torch.randn(2, 4) for _ in range(6)]
    t = TimeMaxPool(in_keys=["obs"], T=3)
    for i, frame in enumerate(frames):
        out = t._call(TensorDict(obs=frame, batch_size=[2]))["obs"]
        expected = torch.stack(frames[max(0, i - 2) : i + 1]).max(0).values
        torch.testing.assert_close(out, expected)


def test_env_only_transforms_name_torchrls_forward_message():
    import re

    from rl_envs import FORWARD_NOT_IMPLEMENTED, ActionMask

    t = ActionMask()
    with pytest.raises(RuntimeError, match=re.escape(FORWARD_NOT_IMPLEMENTED.format(type(t)))):
        t(TensorDict())


def test_clip_without_bounds_uses_torchrls_message():
    from rl_envs import ClipTransform

    with pytest.raises(TypeError, match="Either one or both of `high` and `low` must be provided"):
        ClipTransform(in_keys=["obs"])
    with pytest.raises(TypeError, match="low and high must be scalars or None"):
        ClipTransform(in_keys=["obs"], low=torch.zeros(2))


def test_reward_sum_refuses_reset_keys_that_do_not_pair_with_in_keys():
    from rl_envs import RewardSum

    t = RewardSum(in_keys=["r1", "r2"], reset_keys=["_reset"])
    td = TensorDict({"_reset": torch.zeros(3, dtype=torch.bool)})
    with pytest.raises(ValueError, match="Could not match the env reset_keys"):
        t._reset(td, td.empty())
