"""get_state / set_state through TransformedEnv and SerialEnv: restored envs continue bit for bit."""

from __future__ import annotations

import pytest
import torch

from rl_envs import (
    Compose,
    DoubleToFloat,
    GymEnv,
    PendulumEnv,
    RewardSum,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    VecNorm,
)


def _transformed_cartpole() -> TransformedEnv:
    return TransformedEnv(
        GymEnv("CartPole-v1"),
        Compose(VecNorm(in_keys=["observation"]), DoubleToFloat(), StepCounter(), RewardSum()),
    )


def _serial_pendulums() -> SerialEnv:
    return SerialEnv(2, lambda: GymEnv("Pendulum-v1"))


def _continue(env, root, actions):
    steps = []
    for action in actions:
        td, root = env.step_and_maybe_reset(root.set("action", action))
        steps.append(td.clone())
    return torch.stack(steps)


@pytest.mark.parametrize("make_env", [_transformed_cartpole, _serial_pendulums])
def test_restored_env_replays_the_same_future(make_env) -> None:
    torch.manual_seed(0)
    env = make_env()
    env.set_seed(3)
    root = env.reset()
    for _ in range(30):  # long enough to cross CartPole episode ends under random actions
        _, root = env.step_and_maybe_reset(env.rand_action(root))
    state, saved_root = env.get_state(), root.clone()
    actions = [env.action_spec.rand() for _ in range(40)]
    expected = _continue(env, root, actions)

    fresh = make_env()  # a new process would build a new env, then restore into it
    fresh.set_seed(99)
    fresh.reset()
    fresh.set_state(state)
    got = _continue(fresh, saved_root, actions)
    assert (got == expected).all()
    env.close()
    fresh.close()


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


def test_transformed_env_state_carries_vecnorm_statistics() -> None:
    env = _transformed_cartpole()
    env.set_seed(0)
    env.rollout(20)
    state = env.get_state()
    fresh = _transformed_cartpole()
    untouched = fresh.transform.state_dict()
    assert not _same(untouched, env.transform.state_dict()), "20 steps must move the statistics"
    fresh.set_state(state)
    assert _same(fresh.transform.state_dict(), env.transform.state_dict())


def test_serial_env_state_must_match_the_number_of_sub_envs() -> None:
    two = SerialEnv(2, lambda: PendulumEnv())
    three = SerialEnv(3, lambda: PendulumEnv())
    two.reset()
    three.reset()
    with pytest.raises(ValueError, match="holds 2 sub-envs"):
        three.set_state(two.get_state())
    two.close()
    three.close()
