import time
from functools import partial

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    AsyncEnvPool,
    EnvBase,
    PendulumEnv,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    check_env_specs,
)


def make_counted(max_episode_steps=200):
    return TransformedEnv(PendulumEnv(max_episode_steps=max_episode_steps), StepCounter())


def zero_policy(td):
    return td.set("action", torch.zeros(*td.batch_size, 1))


@pytest.fixture(params=["threading", "multiprocessing"])
def backend(request):
    return request.param


def test_matches_serial_env(backend):
    horizons = [{"max_episode_steps": h} for h in (2, 3, 4)]
    pool = AsyncEnvPool([make_counted] * 3, backend=backend, create_env_kwargs=horizons)
    serial = SerialEnv(3, make_counted, horizons)
    try:
        assert pool.batch_size == (3,)
        pool.set_seed(7)
        serial.set_seed(7)
        got = pool.rollout(5, zero_policy, break_when_any_done=False)
        want = serial.rollout(5, zero_policy, break_when_any_done=False)
        for key in ("observation", ("next", "observation"), ("next", "step_count")):
            torch.testing.assert_close(got[key], want[key])
        assert got["env_index"] == [[0] * 5, [1] * 5, [2] * 5]
    finally:
        pool.close()
        serial.close()


def test_check_env_specs():
    env = AsyncEnvPool([make_counted, make_counted])
    try:
        check_env_specs(env, break_when_any_done="both")
        assert "env_index" in list(env.full_state_spec.keys())
    finally:
        env.close()


def test_async_step_returns_only_what_was_sent():
    env = AsyncEnvPool([make_counted] * 3)
    try:
        root = env.reset()
        root["action"] = torch.zeros(3, 1)
        env.async_step_send(root[torch.tensor([2, 0])])
        out = env.async_step_recv(min_get=2)
        assert out["env_index"] == [0, 2]  # env order, whatever order they finished in
        assert out["next", "step_count"].flatten().tolist() == [1, 1]
        # env 1 was not stepped
        env.async_step_send(root[1:2])
        assert env.async_step_recv()["next", "step_count"].flatten().tolist() == [1]
    finally:
        env.close()


def test_busy_env_and_too_large_min_get_raise():
    env = AsyncEnvPool([make_counted] * 2)
    try:
        env.async_reset_send()
        with pytest.raises(RuntimeError, match="still running a reset"):
            env.async_reset_send(env_index=1)
        with pytest.raises(RuntimeError, match="only 0 envs are running a step"):
            env.async_step_recv()
        env.async_reset_recv(min_get=2)
        with pytest.raises(KeyError, match="env_index"):
            env.async_reset_send(TensorDict(batch_size=[2]))
        with pytest.raises(ValueError, match="distinct"):
            env.async_reset_send(env_index=[0, 0])
    finally:
        env.close()


def test_max_get_and_per_env_recv():
    env = AsyncEnvPool([make_counted] * 3)
    try:
        env.async_reset_send()
        first = env.async_reset_recv(min_get=3, max_get=2)
        assert first["env_index"] == [0, 1]
        rest = env.async_reset_recv(min_get=1)
        assert rest["env_index"] == [2]
        env.async_reset_send(env_index=1)
        single = env.async_reset_recv(env_index=1)
        assert single.batch_size == () and single["env_index"] == 1
    finally:
        env.close()


def test_step_and_maybe_reset_restarts_done_envs():
    env = AsyncEnvPool([partial(make_counted, max_episode_steps=1)] * 2)
    try:
        root = env.reset()
        root["action"] = torch.zeros(2, 1)
        env.async_step_and_maybe_reset_send(root)
        transition, nxt = env.async_step_and_maybe_reset_recv(min_get=2)
        assert transition["next", "done"].all()
        assert nxt["step_count"].flatten().tolist() == [0, 0]  # reset after the episode end
        assert nxt["env_index"] == [0, 1]
    finally:
        env.close()


def test_partial_reset_only_resets_flagged_envs():
    env = AsyncEnvPool([make_counted] * 2)
    try:
        root = env.reset()
        root["action"] = torch.zeros(2, 1)
        root = env.step_mdp(env.step(root))
        root["_reset"] = torch.tensor([[True], [False]])
        out = env.reset(root)
        assert out["step_count"].flatten().tolist() == [0, 1]
        root = out.set("action", torch.zeros(2, 1))
        assert env.step(root)["next", "step_count"].flatten().tolist() == [1, 2]
    finally:
        env.close()


class _SlowEnv(PendulumEnv):
    def _step(self, tensordict):
        time.sleep(0.3)
        return super()._step(tensordict)


def test_timeout():
    env = AsyncEnvPool([_SlowEnv])
    try:
        root = env.reset().set("action", torch.zeros(1, 1))
        env.async_step_send(root)
        with pytest.raises(TimeoutError, match="not in after"):
            env.async_step_recv(timeout=0.01)
        assert env.async_step_recv(timeout=5.0).batch_size == (1,)
    finally:
        env.close()


class _BrokenEnv(PendulumEnv):
    def _step(self, tensordict):
        raise ValueError("broken step")


def _fail():
    raise ValueError("cannot build")


def test_worker_errors_are_reported():
    with pytest.raises(RuntimeError, match=r"env 1 failed to build(?s:.)*cannot build"):
        AsyncEnvPool([PendulumEnv, _fail])
    env = AsyncEnvPool([_BrokenEnv])
    try:
        root = env.reset().set("action", torch.zeros(1, 1))
        with pytest.raises(RuntimeError, match=r"env 0 failed(?s:.)*broken step"):
            env.step(root)
    finally:
        env.close()


def test_bad_arguments():
    with pytest.raises(ValueError, match="backend='asyncio'"):
        AsyncEnvPool([PendulumEnv], backend="asyncio")
    with pytest.raises(ValueError, match="stack='x'"):
        AsyncEnvPool([PendulumEnv], stack="x")
    with pytest.raises(ValueError, match="env 1 has other specs"):
        AsyncEnvPool([PendulumEnv, make_counted])


def test_env_instances_and_close():
    env = AsyncEnvPool([PendulumEnv(), PendulumEnv()], stack="lazy")
    assert isinstance(env, EnvBase)
    assert env.reset().batch_size == (2,)
    env.close()
    env.close()  # twice: nothing
    with pytest.raises(RuntimeError, match="closed"):
        env.async_reset_send()
