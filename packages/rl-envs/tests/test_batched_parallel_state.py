"""ParallelEnv.get_state / set_state: a restored ParallelEnv continues bit for bit."""

from __future__ import annotations

import io
import multiprocessing

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    EnvBase,
    GymEnv,
    ParallelEnv,
    PendulumEnv,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    Unbounded,
    WorkerError,
)


def short_pendulum():
    """Pendulum episodes of 3 steps: resets (from the env's RNG) happen all the time."""
    return TransformedEnv(PendulumEnv(), StepCounter(max_steps=3))


def cartpole():
    return GymEnv("CartPole-v1")


class Stateless(EnvBase):
    """An env that does not implement get_state / set_state."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Unbounded(shape=(1,))
        self.action_spec = Unbounded(shape=(1,))

    def _reset(self, td):
        return TensorDict(observation=torch.zeros(1))

    def _step(self, td):
        return TensorDict(observation=td["action"].clone(), reward=torch.zeros(1))

    def _set_seed(self, seed):
        pass


def _play(env, root, actions):
    """Steps ``env`` from ``root`` with the given actions; returns the stacked transitions."""
    steps = []
    for action in actions:
        td, root = env.step_and_maybe_reset(root.set("action", action))
        steps.append(td.clone())
    return torch.stack(steps, 1)


def _warm_up(env, steps, seed):
    env.set_seed(seed)
    torch.manual_seed(seed)
    root = env.reset()
    for _ in range(steps):
        _, root = env.step_and_maybe_reset(env.rand_action(root))
    return root


def _save(env, root):
    buf = io.BytesIO()
    torch.save({"env": env.get_state(), "root": root.clone()}, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


def _assert_same(a, b):
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize(
    ("make", "num_workers", "envs_per_worker", "actions"),
    [
        (short_pendulum, 2, 1, lambda n: torch.rand(n, 1) * 4 - 2),
        (short_pendulum, 2, 2, lambda n: torch.rand(n, 1) * 4 - 2),
        (cartpole, 2, 2, lambda n: torch.nn.functional.one_hot(torch.randint(2, (n,)), 2)),
    ],
    ids=["pendulum-2x1", "pendulum-2x2", "cartpole-2x2"],
)
def test_set_state_replays_the_same_future(make, num_workers, envs_per_worker, actions):
    n = num_workers * envs_per_worker
    with ParallelEnv(num_workers, make, envs_per_worker=envs_per_worker) as env:
        root = _warm_up(env, 12, seed=3)
        ckpt = _save(env, root)
        assert len(ckpt["env"]["envs"]) == n
        torch.manual_seed(7)
        plan = [actions(n) for _ in range(25)]
        if env.action_spec.dtype != plan[0].dtype:
            plan = [a.to(env.action_spec.dtype) for a in plan]
        expected = _play(env, root, plan)
        assert bool(expected["next", "done"].any()), "the replay must cross episode ends"
        # the same env, moved on and rewound
        env.set_state(ckpt["env"])
        _assert_same(_play(env, ckpt["root"].clone(), plan), expected)
    # a fresh ParallelEnv (seeded differently), as after a restart
    with ParallelEnv(num_workers, make, envs_per_worker=envs_per_worker) as fresh:
        fresh.set_seed(123)
        fresh.reset()
        fresh.set_state(ckpt["env"])
        _assert_same(_play(fresh, ckpt["root"].clone(), plan), expected)
    assert multiprocessing.active_children() == []


def test_state_moves_between_serial_and_parallel_layouts():
    serial = SerialEnv(4, short_pendulum)
    root = _warm_up(serial, 5, seed=1)
    state = serial.get_state()
    torch.manual_seed(2)
    plan = [torch.rand(4, 1) * 4 - 2 for _ in range(10)]
    expected = _play(serial, root.clone(), plan)
    serial.set_state(state)
    torch.manual_seed(4)
    rolled = serial.rollout(8, auto_reset=False, tensordict=root.clone(), break_when_any_done=False)
    with ParallelEnv(2, short_pendulum, envs_per_worker=2) as env:  # set_state starts the workers
        env.set_state(state)
        _assert_same(_play(env, root.clone(), plan), expected)
        back = env.get_state()
        # the random-action rollout (one step-and-reset command per step) resumes as well
        env.set_state(state)
        torch.manual_seed(4)
        _assert_same(
            env.rollout(8, auto_reset=False, tensordict=root.clone(), break_when_any_done=False),
            rolled,
        )
    serial.set_state(back)  # and back: the states are in batch-row order either way
    again = SerialEnv(4, short_pendulum)
    again.set_state(state)
    _assert_same(_play(again, root.clone(), plan), expected)


def test_sub_envs_without_state_raise_and_the_env_stays_usable():
    with ParallelEnv(2, Stateless, envs_per_worker=2) as env:
        with pytest.raises(NotImplementedError, match=r"Stateless does not implement get_state"):
            env.get_state()
        with pytest.raises(NotImplementedError, match=r"Stateless does not implement set_state"):
            env.set_state({"envs": [{}] * 4})
        assert env.rollout(3).batch_size == (4, 3)  # the workers are still serving


def test_state_errors():
    with ParallelEnv(2, PendulumEnv) as env:
        with pytest.raises(ValueError, match=r"holds 3 sub-envs, this env has 2"):
            env.set_state({"envs": [{}] * 3})
        wrong = PendulumEnv(batch_size=[2]).get_state()  # a state of another batch size
        with pytest.raises(WorkerError, match=r"PendulumEnv.set_state\(\): the state is for"):
            env.set_state({"envs": [wrong, wrong]})
        assert env.rollout(2).batch_size == (2, 2)
    with pytest.raises(RuntimeError, match="closed"):
        env.get_state()
