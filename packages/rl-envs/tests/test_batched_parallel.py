import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    EnvBase,
    EnvCreator,
    ParallelEnv,
    PendulumEnv,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    WorkerError,
    check_env_specs,
)


def zero_policy(td):
    return td.set("action", torch.zeros(*td.batch_size, 1))


def no_children_left():
    return multiprocessing.active_children() == []


def test_fork_matches_serial_env():
    serial = SerialEnv(4, PendulumEnv)
    serial.set_seed(3)
    expected = serial.rollout(6, zero_policy)
    with ParallelEnv(2, PendulumEnv, envs_per_worker=2, mp_start_method="fork") as env:
        assert env.batch_size == (4,)
        assert env.set_seed(3) == 7
        out = env.rollout(6, zero_policy)
    assert torch.equal(out["next", "observation"], expected["next", "observation"])
    assert torch.equal(out["next", "reward"], expected["next", "reward"])
    assert no_children_left()


def test_spawned_workers_start_after_tensordict_leaked_its_lazy_legacy_variable(monkeypatch):
    # tensordict 0.14's set_lazy_legacy leaves LAZY_LEGACY_OP="None" behind on exit; a spawned
    # worker importing tensordict with it failed at every stack.
    monkeypatch.setenv("LAZY_LEGACY_OP", "None")
    pytest.importorskip("cloudpickle")
    # by value (cloudpickle): the worker stacks TensorDicts first (tensordict 0.14 reads the variable)
    make = EnvCreator(
        lambda: (torch.stack([TensorDict({"x": torch.zeros(1)}, [1])] * 2), PendulumEnv())[1]
    )
    with ParallelEnv(2, make, mp_start_method="spawn") as env:
        assert env.rollout(2, zero_policy).shape == (2, 2)


def test_spawn_with_a_lambda_in_env_creator():
    pytest.importorskip("cloudpickle")
    make = EnvCreator(lambda: TransformedEnv(PendulumEnv(), StepCounter(max_steps=2)))
    serial = SerialEnv(2, make)
    serial.set_seed(5)
    expected = serial.rollout(4, zero_policy, break_when_any_done=False)
    with ParallelEnv(2, make, mp_start_method="spawn") as env:
        env.set_seed(5)
        out = env.rollout(4, zero_policy, break_when_any_done=False)
    assert out["next", "step_count"][0].squeeze(-1).tolist() == [1, 2, 1, 2]
    assert torch.equal(out["next", "observation"], expected["next", "observation"])
    assert no_children_left()


def test_mixed_lengths_partial_reset_and_specs():
    horizons = [2, 3, 4]

    def make(h):
        return TransformedEnv(PendulumEnv(max_episode_steps=h), StepCounter())

    env = ParallelEnv(3, make, [{"h": h} for h in horizons])
    check_env_specs(env)
    r = env.rollout(9, break_when_any_done=False)
    for row, h in enumerate(horizons):
        expected = torch.tensor([(t % h) + 1 for t in range(9)])
        assert torch.equal(r["next", "step_count"][row].squeeze(-1), expected)
        assert torch.equal(r["next", "done"][row].squeeze(-1), expected == h)
    _td, root = env.step_and_maybe_reset(env.rand_action(env.reset()))
    assert root["step_count"].squeeze(-1).tolist() == [1, 1, 1]
    env.close()
    env.close()
    assert no_children_left()


class Faulty(EnvBase):
    """Raises (or dies) on its ``fail_at``-th step."""

    def __init__(self, fail_at=2, how="raise"):
        super().__init__()
        self.inner = PendulumEnv()
        self.observation_spec = self.inner.observation_spec.clone()
        self.action_spec = self.inner.action_spec.clone()
        self.fail_at, self.how, self.t = fail_at, how, 0

    def _reset(self, td):
        return self.inner._reset(td)

    def _step(self, td):
        self.t += 1
        if self.t == self.fail_at:
            if self.how == "raise":
                raise ValueError("boom from the sub-env")
            os.kill(os.getpid(), signal.SIGKILL)
        return self.inner._step(td)

    def _set_seed(self, seed):
        pass


def test_worker_exception_is_raised_with_traceback():
    env = ParallelEnv(2, Faulty)
    td = env.reset()
    env.rand_step(td)
    with pytest.raises(WorkerError, match=r"(?s)boom from the sub-env.*Traceback|Traceback.*boom"):
        env.rand_step(td)
    assert no_children_left()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()
    env.close()


def test_worker_killed_by_signal_is_reported():
    env = ParallelEnv(2, Faulty, {"how": "kill"})
    td = env.reset()
    env.rand_step(td)
    with pytest.raises(WorkerError, match="SIGKILL"):
        env.rand_step(td)
    assert no_children_left()


def test_killed_from_outside_between_steps():
    env = ParallelEnv(2, PendulumEnv)
    td = env.reset()
    os.kill(env._procs[1].pid, signal.SIGKILL)
    with pytest.raises(WorkerError, match="worker 1"):
        env.rand_step(td)
    assert no_children_left()


def test_error_in_parent_leaves_no_workers():
    with pytest.raises(ZeroDivisionError), ParallelEnv(2, PendulumEnv) as env:
        env.rollout(2)
        _ = 1 / 0
    assert no_children_left()


def _gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[1].split()[0] == "Z"  # exited, awaiting its new reaper
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("death", [pytest.param("exception", marks=pytest.mark.slow), "sigkill"])
def test_parent_process_death_leaves_no_orphans(death):
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from rl_envs import ParallelEnv, PendulumEnv
        env = ParallelEnv(2, PendulumEnv)
        env.reset()
        print(" ".join(str(p.pid) for p in env._procs), flush=True)
        if {death!r} == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("the parent fails")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) == 2, proc.stderr
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.1)
    assert all(_gone(p) for p in pids)


def test_missing_input_key_is_named():
    env = ParallelEnv(1, PendulumEnv)
    with pytest.raises(KeyError, match="'action'"):
        env._step(TensorDict(batch_size=[1]))
    env.close()
