"""Fault suite for worker processes (issue 36): ParallelEnv and the multiprocess collectors.

Every case injects one process-level fault (a worker that blocks, raises, exits, is killed or
stopped; a parent killed while its workers are busy; a bad weight update) and checks that the
caller gets a clear error quickly, that closing afterwards neither hangs nor fails, and that
no process is left behind. Timeouts here are short (1 s); the defaults are 300 s.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from fault_envs import FaultEnv, make_fault_env
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from rl_collectors import (
    Collector,
    MultiAsyncCollector,
    MultiSyncCollector,
)
from rl_collectors import WorkerError as CollectorWorkerError
from rl_collectors import WorkerTimeoutError as CollectorTimeoutError
from rl_envs import AsyncEnvPool, ParallelEnv, WorkerError, WorkerTimeoutError

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
HERE = Path(__file__).parent
COLLECTORS = [MultiSyncCollector, MultiAsyncCollector]


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):  # gone before, or while, reading
        return "X"


def _gone(pid: int) -> bool:
    return _state(pid) in ("Z", "X")


def _stop(pid: int) -> None:
    """SIGSTOP ``pid`` and wait until the kernel shows it stopped (signals are asynchronous)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while _state(pid) != "T":
        assert time.monotonic() < deadline, f"pid {pid} did not stop"
        time.sleep(0.01)


def _no_children() -> bool:
    return multiprocessing.active_children() == []


@pytest.fixture(autouse=True)
def _leaves_no_process():
    yield
    children = multiprocessing.active_children()
    assert children == [], f"processes left behind: {children}"


def _policy() -> TensorDictModule:
    return TensorDictModule(nn.Linear(3, 1), ["observation"], ["action"])


def _collector(cls, envs, policy=None, timeout=1.0, **kwargs):
    """A collector whose workers had all the time they need to start (a loaded machine may
    take seconds to import torch in a fresh worker); then ``timeout`` applies."""
    collector = cls(envs, policy, frames_per_batch=20, timeout=120.0, **kwargs)
    collector.timeout = timeout
    return collector


# --------------------------------------------------------------------- ParallelEnv


@pytest.mark.parametrize("where", ["step", "reset"])
def test_parallel_env_worker_blocked_times_out_naming_it(where):
    env = ParallelEnv(2, FaultEnv, [{}, {"fault": "sleep", "where": where, "at": 2}], timeout=1.0)
    td = env.reset()
    env.rand_step(td)
    pid = env._procs[1].pid
    with pytest.raises(WorkerTimeoutError) as info:
        env.rand_step(td) if where == "step" else env.reset()
    assert f"worker 1 (pid {pid})" in str(info.value) and f"'{where}'" in str(info.value)
    assert "sleeping" in str(info.value)
    assert _gone(pid)


@linux_only
def test_parallel_env_stopped_worker_is_reported_as_stopped():
    env = ParallelEnv(2, FaultEnv, timeout=1.0)
    td = env.reset()
    pid = env._procs[1].pid
    _stop(pid)
    with pytest.raises(WorkerTimeoutError, match=r"worker 1 \(pid \d+\).*stopped \(SIGSTOP"):
        env.rand_step(td)
    assert _gone(pid)


@pytest.mark.parametrize("where", ["step", "reset"])
def test_parallel_env_worker_raising_gives_its_traceback(where):
    env = ParallelEnv(2, FaultEnv, [{}, {"fault": "raise", "where": where, "at": 2}])
    td = env.reset()
    env.rand_step(td)
    with pytest.raises(WorkerError, match=rf"(?s)fault injected in {where}.*Traceback|Traceback"):
        env.rand_step(td) if where == "step" else env.reset()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


@pytest.mark.parametrize(
    "fault, status", [("exit", "exited with code 3"), ("kill", "was killed by signal SIGKILL")]
)
def test_parallel_env_worker_dying_in_step_is_named_at_once(fault, status):
    env = ParallelEnv(2, FaultEnv, [{}, {"fault": fault, "at": 1}], timeout=60.0)
    td = env.reset()
    pid = env._procs[1].pid
    started = time.monotonic()
    with pytest.raises(WorkerError, match=rf"worker 1 \(pid {pid}\) {status} while running 'step'"):
        env.rand_step(td)
    assert time.monotonic() - started < 30  # seen through the pipe, not by the 60 s timeout


def test_parallel_env_worker_killed_from_outside_while_idle():
    env = ParallelEnv(2, FaultEnv, timeout=60.0)
    td = env.reset()
    pid = env._procs[0].pid
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(WorkerError, match=rf"worker 0 \(pid {pid}\) was killed by signal SIGKILL"):
        env.rand_step(td)


def test_parallel_env_close_after_timeout_and_twice():
    env = ParallelEnv(1, FaultEnv, {"fault": "sleep"}, timeout=1.0)
    td = env.reset()
    with pytest.raises(WorkerTimeoutError):
        env.rand_step(td)
    env.close()
    env.close()
    with pytest.raises(RuntimeError, match="close a closed"):
        env.close(raise_if_closed=True)


@linux_only
def test_parallel_env_close_with_a_stopped_worker_kills_it():
    env = ParallelEnv(2, FaultEnv, timeout=60.0)
    env.reset()
    procs = list(env._procs)
    _stop(procs[0].pid)
    env.close()
    assert procs[0].exitcode == -signal.SIGKILL and procs[1].exitcode == 0


@pytest.mark.parametrize("timeout", [None, 0, -5])
def test_parallel_env_refuses_a_timeout_that_is_not_a_positive_number(timeout):
    with pytest.raises(ValueError, match="timeout="):
        ParallelEnv(1, FaultEnv, timeout=timeout)


def test_parallel_env_infinite_timeout_is_accepted_explicitly():
    with ParallelEnv(1, FaultEnv, timeout=math.inf) as env:
        assert env.rollout(3).shape == (1, 3)


# ------------------------------------------------------------------------ collectors


@pytest.mark.parametrize("cls", COLLECTORS)
def test_collector_worker_blocked_in_step_times_out_naming_it(cls):
    collector = _collector(
        cls, [make_fault_env, functools.partial(make_fault_env, fault="sleep", at=3)]
    )
    pid = collector._procs[1].pid
    with pytest.raises(CollectorTimeoutError) as info:
        for _ in collector:
            pass
    message = str(info.value)
    assert f"worker 1 (pid {pid}) running 'collect'" in message and "sleeping" in message
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, CollectorWorkerError)
    assert _gone(pid)
    collector.shutdown()  # after the timeout: nothing to do, no hang
    collector.shutdown()


@linux_only
@pytest.mark.parametrize("cls", COLLECTORS)
def test_collector_stopped_worker_is_reported_as_stopped(cls):
    collector = _collector(cls, [make_fault_env] * 2)
    next(iter(collector))
    pid = collector._procs[0].pid
    _stop(pid)
    deadline = time.monotonic() + 30  # an async collector keeps yielding worker 1's batches
    with pytest.raises(CollectorTimeoutError, match=rf"worker 0 \(pid {pid}\).*stopped \(SIGSTOP"):
        while time.monotonic() < deadline:
            collector.next()
    collector.shutdown()
    assert _gone(pid)


@pytest.mark.parametrize("cls", COLLECTORS)
def test_collector_worker_raising_in_step_gives_its_traceback(cls):
    collector = _collector(
        cls, [make_fault_env, functools.partial(make_fault_env, fault="raise", at=3)]
    )
    with pytest.raises(CollectorWorkerError, match="fault injected in step"):
        for _ in collector:
            pass


def test_collector_worker_raising_in_reset_gives_its_traceback():
    envs = [make_fault_env, functools.partial(make_fault_env, fault="raise", where="reset", at=1)]
    collector = _collector(MultiSyncCollector, envs)
    with pytest.raises(CollectorWorkerError, match="fault injected in reset"):
        collector.next()


def test_collector_worker_blocked_in_reset_times_out():
    envs = [make_fault_env, functools.partial(make_fault_env, fault="sleep", where="reset", at=1)]
    collector = _collector(MultiSyncCollector, envs)
    with pytest.raises(CollectorTimeoutError, match=r"worker 1 \(pid \d+\) running 'collect'"):
        collector.next()


@pytest.mark.parametrize("fault", ["exit", "kill"])
def test_collector_worker_dying_is_named_with_its_exit(fault):
    envs = [make_fault_env, functools.partial(make_fault_env, fault=fault, at=3)]
    collector = _collector(MultiSyncCollector, envs, timeout=60.0)
    started = time.monotonic()
    code = "3" if fault == "exit" else "-9"
    with pytest.raises(CollectorWorkerError, match=rf"worker 1 died \(exit code {code}\)"):
        collector.next()
    assert time.monotonic() - started < 30  # seen through the sentinel, not the timeout


def test_collector_worker_killed_from_outside_between_batches():
    collector = _collector(MultiSyncCollector, [make_fault_env] * 2, timeout=60.0)
    collector.next()
    os.kill(collector._procs[0].pid, signal.SIGKILL)
    with pytest.raises(CollectorWorkerError, match=r"worker 0 died \(exit code -9\)"):
        collector.next()


@linux_only
def test_collector_shutdown_with_a_stopped_idle_worker_kills_it():
    collector = _collector(MultiSyncCollector, [make_fault_env] * 2, timeout=60.0)
    collector.next()
    pids = [p.pid for p in collector._procs]
    _stop(pids[1])
    started = time.monotonic()
    collector.shutdown()
    assert time.monotonic() - started < 5  # not the 10 s grace of a live worker
    assert all(_gone(pid) for pid in pids)


@pytest.mark.parametrize("timeout", [None, 0, -1.0])
def test_collector_refuses_a_timeout_that_is_not_a_positive_number(timeout):
    with pytest.raises(ValueError, match="timeout="):
        MultiSyncCollector([make_fault_env], None, frames_per_batch=10, timeout=timeout)


# ------------------------------------------------------------- parent death (orphans)

_ORPHAN_SCRIPT = """
import sys
sys.path.insert(0, {here!r})
from fault_envs import make_fault_env, FaultEnv
import functools

def main():
    if {kind!r} == "parallel_env":
        from rl_envs import ParallelEnv
        env = ParallelEnv(2, FaultEnv, {{"fault": "sleep"}})
        td = env.reset()
        print(" ".join(str(p.pid) for p in env._procs), flush=True)
        env.rand_step(td)  # blocks in the workers' _step: the test kills us meanwhile
    elif {kind!r} == "async_env_pool":
        from rl_envs import AsyncEnvPool
        makers = [functools.partial(make_fault_env, fault="sleep")] * 2
        env = AsyncEnvPool(makers, backend="multiprocessing")
        td = env.reset()
        print(" ".join(str(w.pid) for w in env._workers), flush=True)
        env.rand_step(td)  # blocks in the workers' env step
    else:
        from rl_collectors import MultiSyncCollector
        env = functools.partial(make_fault_env, fault="sleep")
        collector = MultiSyncCollector([env, env], None, frames_per_batch=20)
        print(" ".join(str(p.pid) for p in collector._procs), flush=True)
        collector.next()  # blocks in the workers' env step

if __name__ == "__main__":
    main()
"""


@linux_only
@pytest.mark.parametrize("kind", ["parallel_env", "multi_sync_collector", "async_env_pool"])
def test_parent_sigkilled_while_workers_block_in_step_leaves_no_orphan(kind, tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(_ORPHAN_SCRIPT.format(here=str(HERE), kind=kind)))
    with subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True
    ) as parent:
        pids = [int(p) for p in parent.stdout.readline().split()]
        try:
            assert len(pids) == 2
            time.sleep(1.0)  # the workers are inside the env's step by now
            assert not any(_gone(p) for p in pids)
            parent.kill()
            parent.wait()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not all(_gone(p) for p in pids):
                time.sleep(0.05)
            assert all(_gone(p) for p in pids), [(p, _state(p)) for p in pids]
        finally:
            parent.kill()
            for pid in pids:
                if not _gone(pid):
                    os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------------ weight updates


def _mlp() -> TensorDictModule:
    return TensorDictModule(
        nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)), ["observation"], ["action"]
    )


def _bad_weights(good: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    w, b = "module.0.weight", "module.0.bias"
    return {
        "partial": {w: good[w]},
        "broadcastable": {**good, w: torch.ones(1, 1)},
        "extra key": {**good, "module.9.weight": torch.ones(2)},
        "int64 for float": {**good, w: good[w].long()},
        "NaN": {**good, w: torch.full_like(good[w], float("nan"))},
        "inf": {**good, b: torch.full_like(good[b], float("inf"))},
        "good weight, wrong-shape bias": {**good, w: good[w] + 1, b: torch.ones(5)},
    }


@pytest.mark.parametrize(
    "case",
    [
        "partial",
        "broadcastable",
        "extra key",
        "int64 for float",
        "NaN",
        "inf",
        "good weight, wrong-shape bias",
    ],
)
def test_multi_collector_refuses_bad_weights_atomically(case):
    policy = _mlp()
    collector = _collector(MultiSyncCollector, [make_fault_env], policy, timeout=60.0)
    try:
        good = {k: v.detach().clone() for k, v in policy.state_dict().items()}
        shared_before = collector._weights.weights.clone()
        with pytest.raises(ValueError, match=r"refused the new weights, nothing was changed"):
            collector.update_policy_weights_(_bad_weights(good)[case])
        assert collector.policy_version == 0
        assert (collector._weights.weights == shared_before).all()
        collector.update_policy_weights_({k: v + 1 for k, v in good.items()})
        assert collector.policy_version == 1
    finally:
        collector.shutdown()


@pytest.mark.parametrize(
    "case",
    [
        "partial",
        "broadcastable",
        "extra key",
        "int64 for float",
        "NaN",
        "good weight, wrong-shape bias",
    ],
)
def test_collector_refuses_bad_weights_atomically(case):
    trainer, acting = _mlp(), _mlp()
    collector = Collector(FaultEnv(), acting, frames_per_batch=4, total_frames=8)
    good = {k: v.detach().clone() for k, v in trainer.state_dict().items()}
    before = {k: v.detach().clone() for k, v in acting.state_dict().items()}
    with pytest.raises(ValueError, match=r"policy_version stays 0.*nothing was changed"):
        collector.update_policy_weights_(_bad_weights(good)[case])
    assert collector.policy_version == 0
    for key, value in acting.state_dict().items():
        assert torch.equal(value, before[key]), key
    collector.update_policy_weights_(good)
    assert collector.policy_version == 1
    assert torch.equal(acting.state_dict()["module.0.weight"], good["module.0.weight"])
    collector.shutdown()


def test_weights_from_a_different_architecture_are_named():
    collector = _collector(MultiSyncCollector, [make_fault_env], _mlp(), timeout=60.0)
    other = TensorDictModule(nn.Linear(3, 1), ["observation"], ["action"])
    try:
        with pytest.raises(ValueError, match=r"missing keys \['module.0.weight'"):
            collector.update_policy_weights_(other)
        with pytest.raises(ValueError, match="unexpected keys"):
            collector.update_policy_weights_(TensorDict.from_module(other))
    finally:
        collector.shutdown()


def test_a_float64_update_is_cast_like_load_state_dict():
    policy = _mlp()
    collector = _collector(MultiSyncCollector, [make_fault_env], policy, timeout=60.0)
    try:
        doubled = {k: (v.detach() * 2).double() for k, v in policy.state_dict().items()}
        collector.update_policy_weights_(doubled)
        assert collector.policy_version == 1
        shared = collector._weights.weights["module", "0", "weight"]
        assert shared.dtype == torch.float32
        assert torch.equal(shared, doubled["module.0.weight"].float())
    finally:
        collector.shutdown()


# ------------------------------------------------------------------ AsyncEnvPool


def _pool(backend: str, fault: str | None = None, where: str = "step") -> AsyncEnvPool:
    makers = [
        functools.partial(make_fault_env),
        functools.partial(make_fault_env, fault=fault, where=where, at=2 if where == "step" else 1),
    ]
    return AsyncEnvPool(makers, backend=backend, timeout=1.0)


@pytest.mark.parametrize("backend", ["threading", "multiprocessing"])
def test_async_pool_env_blocked_in_step_times_out_naming_it(backend):
    pool = _pool(backend, fault="sleep")
    try:
        td = pool.reset()
        pool.rand_step(td)
        with pytest.raises(WorkerTimeoutError, match=r"step results .* not in after 1.0 s") as info:
            pool.rand_step(td)
        assert "env 1" in str(info.value)
        if backend == "multiprocessing":
            pid = pool._workers[1].pid
            assert f"pid {pid}" in str(info.value) and "sleeping" in str(info.value)
    finally:
        pool.close()


def test_async_pool_async_recv_times_out_by_default():
    pool = _pool("multiprocessing", fault="sleep")
    try:
        td = pool.reset()
        pool.rand_step(td)
        pool.async_step_send(td[1:])
        with pytest.raises(WorkerTimeoutError):
            pool.async_step_recv()
    finally:
        pool.close()


def test_async_pool_dead_worker_is_reported_at_once():
    pool = _pool("multiprocessing", fault="kill")
    try:
        td = pool.reset()
        pool.rand_step(td)
        start = time.monotonic()
        with pytest.raises(WorkerError, match=r"env\(s\) \[1\] ended while running a step"):
            pool.rand_step(td)
        assert time.monotonic() - start < 1.0  # not the timeout: the death is seen
    finally:
        pool.close()


def test_async_pool_bad_timeout_is_refused():
    with pytest.raises(ValueError, match="a None timeout would wait on a stuck worker forever"):
        AsyncEnvPool([make_fault_env], timeout=None)
