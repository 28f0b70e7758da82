"""Overhead of the reliability checks (issue 36): worker-reply timeouts and weight validation.

Times, on CPU, median of several repeats:

1. ``ParallelEnv(2, PendulumEnv).step`` (the parent waits on both workers each step);
2. ``MultiSyncCollector`` iteration (2 workers, toy env from rl-collectors' tests);
3. ``SharedWeights.push`` of a ~100k-parameter MLP's weights (the validated, atomic copy).

Run: ``uv run --no-sync python benchmarks/bench_fault_overhead.py``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "packages" / "rl-collectors" / "tests"))


def _median(fn, repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bench_parallel_env(steps: int = 2000) -> float:
    from rl_envs import ParallelEnv, PendulumEnv

    with ParallelEnv(2, PendulumEnv) as env:
        td = env.reset()
        td["action"] = torch.zeros(2, 1)

        def run() -> None:
            for _ in range(steps):
                env._step(td)

        return _median(run) / steps


def bench_multi_sync(batches: int = 20) -> float:
    from rl_collectors_toy_env import make_toy_env

    from rl_collectors import MultiSyncCollector

    policy = TensorDictModule(nn.Linear(3, 1), ["observation"], ["action"])
    with MultiSyncCollector(
        make_toy_env,
        policy,
        num_workers=2,
        frames_per_batch=400,
        create_env_kwargs={"batch_size": (4,)},
    ) as collector:
        it = iter(collector)
        next(it)

        def run() -> None:
            for _ in range(batches):
                next(it)

        return _median(run, 5) / batches


def bench_weight_push(updates: int = 200) -> float:
    from rl_collectors._weights import SharedWeights

    net = nn.Sequential(
        nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 64)
    )
    numel = sum(p.numel() for p in net.parameters())
    assert 90_000 < numel < 120_000, numel
    shared = SharedWeights(net, mp.get_context("spawn"))
    state = {k: v.detach().clone() for k, v in net.state_dict().items()}
    td = TensorDict.from_module(net).data

    def run(source) -> float:
        def go() -> None:
            for _ in range(updates):
                shared.push(source)

        return _median(go) / updates

    return {"module": run(net), "state_dict": run(state), "tensordict": run(td)}


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(f"ParallelEnv(2, PendulumEnv)._step: {bench_parallel_env() * 1e6:.1f} us/step")
    print(f"MultiSyncCollector 400 frames, 2 workers: {bench_multi_sync() * 1e3:.2f} ms/batch")
    for kind, seconds in bench_weight_push().items():
        print(f"SharedWeights.push ~100k params ({kind}): {seconds * 1e6:.1f} us")
