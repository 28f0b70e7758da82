"""ParallelEnv under process faults: timeouts, stopped workers, a parent that dies."""

import math
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rl_envs import EnvBase, ParallelEnv, PendulumEnv, WorkerError, WorkerTimeoutError


class Blocking(EnvBase):
    """PendulumEnv whose ``_step`` (or ``_reset``) sleeps for an hour on its ``at``-th call."""

    def __init__(self, where=None, at=1):
        super().__init__()
        self.inner = PendulumEnv()
        self.observation_spec = self.inner.observation_spec.clone()
        self.action_spec = self.inner.action_spec.clone()
        self.where, self.at, self.calls = where, at, {"step": 0, "reset": 0}

    def _block(self, where):
        self.calls[where] += 1
        if where == self.where and self.calls[where] == self.at:
            time.sleep(3600)

    def _reset(self, td):
        self._block("reset")
        return self.inner._reset(td)

    def _step(self, td):
        self._block("step")
        return self.inner._step(td)

    def _set_seed(self, seed):
        pass


def no_children_left():
    return multiprocessing.active_children() == []


@pytest.mark.parametrize("timeout", [None, 0, -1.0, "soon"])
def test_timeout_must_be_a_positive_number(timeout):
    with pytest.raises(ValueError, match=r"timeout=.*(math.inf|positive|number)"):
        ParallelEnv(1, PendulumEnv, timeout=timeout)


def test_infinite_timeout_is_explicit_and_works():
    with ParallelEnv(1, PendulumEnv, timeout=math.inf) as env:
        assert env.timeout == math.inf
        assert env.rollout(2).shape == (1, 2)


def test_default_timeout_is_finite():
    assert ParallelEnv(1, PendulumEnv).timeout == 300.0


@pytest.mark.parametrize("where", ["step", "reset"])
def test_worker_blocked_in_user_code_times_out_with_its_pid(where):
    env = ParallelEnv(2, Blocking, [{}, {"where": where, "at": 2}], timeout=1.0)
    td = env.reset()
    env.rand_step(td)
    pid = env._procs[1].pid
    with pytest.raises(WorkerTimeoutError) as info:
        env.rand_step(td) if where == "step" else env.reset()
    message = str(info.value)
    assert f"worker 1 (pid {pid})" in message and f"'{where}'" in message
    assert "worker 0" not in message  # worker 0 answered
    assert "is sleeping" in message and "timeout=1.0" in message
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, WorkerError)
    assert no_children_left()
    env.close()  # closing after the timeout does nothing, and twice is fine
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


def test_worker_blocked_while_building_times_out():
    # the sub-env's first reset is not part of the build: block the build itself
    with pytest.raises(WorkerTimeoutError, match=r"'building the sub-envs'.*worker 0"):
        ParallelEnv(1, _slow_build, timeout=1.0, use_buffers=True).reset()
    assert no_children_left()


def _slow_build():
    if multiprocessing.parent_process() is not None:  # the probe in the parent builds fast
        time.sleep(3600)
    return PendulumEnv()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_stopped_worker_is_named_stopped_then_killed():
    env = ParallelEnv(2, PendulumEnv, timeout=1.0)
    td = env.reset()
    pid = env._procs[0].pid
    _stop(pid)
    with pytest.raises(WorkerTimeoutError, match=rf"worker 0 \(pid {pid}\).*stopped \(SIGSTOP"):
        env.rand_step(td)
    assert no_children_left()


def _stop(pid):
    """SIGSTOP ``pid`` and wait until the kernel shows it stopped (the signal is async)."""
    os.kill(pid, signal.SIGSTOP)
    for _ in range(200):
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)
    raise AssertionError(f"pid {pid} did not stop")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_close_with_a_stopped_worker_does_not_wait_for_it():
    env = ParallelEnv(2, PendulumEnv, timeout=60.0)
    env.reset()
    procs = list(env._procs)
    _stop(procs[1].pid)
    env.close()
    assert procs[1].exitcode == -signal.SIGKILL and procs[0].exitcode == 0
    assert no_children_left()


def _gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_parent_killed_while_worker_blocked_in_step_leaves_no_orphan(tmp_path):
    (tmp_path / "blocking_env.py").write_text(
        textwrap.dedent(
            """
            import time
            from rl_envs import EnvBase, PendulumEnv

            class Blocking(EnvBase):
                def __init__(self):
                    super().__init__()
                    self.inner = PendulumEnv()
                    self.observation_spec = self.inner.observation_spec.clone()
                    self.action_spec = self.inner.action_spec.clone()
                def _reset(self, td):
                    return self.inner._reset(td)
                def _step(self, td):
                    time.sleep(3600)
                def _set_seed(self, seed):
                    pass
            """
        )
    )
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from blocking_env import Blocking
        from rl_envs import ParallelEnv
        env = ParallelEnv(2, Blocking)
        td = env.reset()
        print(" ".join(str(p.pid) for p in env._procs), flush=True)
        env.rand_step(td)  # blocks: the test kills this process meanwhile
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    ) as parent:
        pids = [int(p) for p in parent.stdout.readline().split()]
        try:
            assert len(pids) == 2
            time.sleep(0.5)  # the workers are now inside _step
            assert not any(_gone(p) for p in pids)
            parent.kill()
            parent.wait()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not all(_gone(p) for p in pids):
                time.sleep(0.05)
            assert all(_gone(p) for p in pids)
        finally:
            parent.kill()
            for pid in pids:
                if not _gone(pid):
                    os.kill(pid, signal.SIGKILL)
