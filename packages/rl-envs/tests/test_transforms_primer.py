import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    PendulumEnv,
    TensorDictPrimer,
    TransformedEnv,
    Unbounded,
    check_env_specs,
    step_mdp,
)


def test_primes_and_carries_entries():
    primer = TensorDictPrimer(hidden=Unbounded(shape=(2, 4)), default_value=0.5)
    env = TransformedEnv(PendulumEnv(batch_size=[3]), primer)
    assert env.observation_spec["hidden"].shape == (3, 2, 4)
    assert env.state_spec["hidden"].shape == (3, 2, 4)
    td = env.reset()
    torch.testing.assert_close(td["hidden"], torch.full((3, 2, 4), 0.5))
    td["hidden"] = torch.ones(3, 2, 4)  # a policy writes its state; the env carries it over
    td = env.rand_step(td)
    torch.testing.assert_close(td["next", "hidden"], torch.ones(3, 2, 4))
    check_env_specs(env)


def test_partial_reset_and_random():
    env = TransformedEnv(
        PendulumEnv(batch_size=[2]), TensorDictPrimer(h=Unbounded(shape=(1,)), default_value=0.0)
    )
    td = step_mdp(env.rand_step(env.reset()))
    td["h"] = torch.tensor([[7.0], [8.0]])
    td["_reset"] = torch.tensor([[True], [False]])
    out = env.reset(td)
    assert out["h"].squeeze(-1).tolist() == [0.0, 8.0]
    t = TensorDictPrimer(h=Unbounded(shape=(3,)), random=True)
    assert t(TensorDict())["h"].shape == (3,)


def test_callable_default_and_errors():
    t = TensorDictPrimer(h=Unbounded(shape=(2,)), default_value=lambda: torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(t(TensorDict())["h"], torch.tensor([1.0, 2.0]))
    with pytest.raises(KeyError, match="default_value"):
        TensorDictPrimer(a=Unbounded(shape=(1,)), default_value={"b": 1.0})


def test_composite_primers_and_a_zero_default_with_random():
    from rl_envs import Bounded, Composite, TensorDictPrimer, TransformedEnv
    from rl_envs.pendulum import PendulumEnv

    env = TransformedEnv(PendulumEnv(), TensorDictPrimer(mem=Composite(b=Bounded(-3, 3, (4,)))))
    td = env.reset()
    assert torch.equal(td["mem", "b"], torch.zeros(4))
    assert ("mem", "b") in env.observation_spec.keys(True, True)
    drawn = TensorDictPrimer(random=True, default_value=0.0, h=Bounded(-3, 3, (50,)))
    assert (drawn(TensorDict())["h"] != 0).any()
    with pytest.raises(ValueError, match="incompatible"):
        TensorDictPrimer(random=True, default_value=1.0, h=Bounded(-3, 3, (2,)))
