"""Batched env speed: rl_envs SerialEnv / ParallelEnv vs Gymnasium's vector envs (the
raw limit) vs TorchRL 0.14's SerialEnv / ParallelEnv; and the cost of four cheap
transforms (StepCounter, RewardSum, DoubleToFloat, ObservationNorm) on a rollout.

Run: ``.venv-bench/bin/python benchmarks/bench_batched_envs.py`` (``--quick`` divides
the step counts by 5). Prints frames/s (env steps x batch) and ratios.

Every contender steps N copies of the env with random actions, auto-resetting finished
sub-envs, and is timed after start-up and a warm-up. Each figure is the best of
``--repeats`` runs. The machine may have few cores shared with other jobs: compare
ratios within one run, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import functools
import time
import warnings
from collections.abc import Callable

import gymnasium as gym
import torch

import rl_envs

warnings.filterwarnings("ignore")
torch.set_num_threads(1)


def best_of(repeats: int, fn: Callable[[], float]) -> float:
    return max(fn() for _ in range(repeats))


# ----------------------------------------------------------------- raw loops
def gym_vector(name: str, n: int, steps: int, repeats: int, mode: str) -> float:
    fns = [functools.partial(gym.make, name)] * n
    envs = gym.vector.SyncVectorEnv(fns) if mode == "sync" else gym.vector.AsyncVectorEnv(fns)
    envs.reset(seed=0)
    envs.action_space.seed(0)
    for _ in range(10):
        envs.step(envs.action_space.sample())

    def run() -> float:
        t0 = time.perf_counter()
        for _ in range(steps):
            envs.step(envs.action_space.sample())
        return n * steps / (time.perf_counter() - t0)

    try:
        return best_of(repeats, run)
    finally:
        envs.close()


# --------------------------------------------------------------------- ours
def rollout_fps(env, n: int, steps: int, repeats: int) -> float:
    env.set_seed(0)
    env.rollout(10, break_when_any_done=False)

    def run() -> float:
        t0 = time.perf_counter()
        env.rollout(steps, break_when_any_done=False)
        return n * steps / (time.perf_counter() - t0)

    try:
        return best_of(repeats, run)
    finally:
        env.close()


def ours(name: str, n: int, steps: int, repeats: int, kind: str) -> float:
    make = functools.partial(rl_envs.GymEnv, name, validate_actions=False)
    if kind == "serial":
        env = rl_envs.SerialEnv(n, make)
    elif kind == "parallel":
        env = rl_envs.ParallelEnv(n, make)
    else:  # two workers, n / 2 envs each: one process per core of a 2-core machine
        env = rl_envs.ParallelEnv(2, make, envs_per_worker=n // 2)
    return rollout_fps(env, n, steps, repeats)


def torchrl_batched(name: str, n: int, steps: int, repeats: int, kind: str) -> float:
    from torchrl.envs import GymEnv, ParallelEnv, SerialEnv

    make = functools.partial(GymEnv, name)
    env = SerialEnv(n, make) if kind == "serial" else ParallelEnv(n, make)
    return rollout_fps(env, n, steps, repeats)


# --------------------------------------------------------------- transforms
def four_transforms() -> rl_envs.Compose:
    return rl_envs.Compose(
        rl_envs.StepCounter(),
        rl_envs.RewardSum(),
        rl_envs.DoubleToFloat(),
        rl_envs.ObservationNorm(loc=0.0, scale=1.0, in_keys=["observation"]),
    )


def transform_overhead(name: str, n: int, steps: int, repeats: int) -> tuple[float, float]:
    """(bare fps, transformed fps), measured interleaved on the same kind of env."""

    def make_base():
        if n == 1:
            return rl_envs.GymEnv(name, validate_actions=False)
        return rl_envs.ParallelEnv(
            2,
            functools.partial(rl_envs.GymEnv, name, validate_actions=False),
            envs_per_worker=n // 2,
        )

    bare = make_base()
    wrapped = rl_envs.TransformedEnv(make_base(), four_transforms())
    for env in (bare, wrapped):
        env.set_seed(0)
        env.rollout(10, break_when_any_done=False)

    def run(env) -> float:
        t0 = time.perf_counter()
        env.rollout(steps, break_when_any_done=False)
        return n * steps / (time.perf_counter() - t0)

    best_bare = best_wrapped = 0.0
    for _ in range(repeats):
        best_bare = max(best_bare, run(bare))
        best_wrapped = max(best_wrapped, run(wrapped))
    bare.close()
    wrapped.close()
    return best_bare, best_wrapped


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-torchrl", action="store_true")
    args = parser.parse_args()
    div = 5 if args.quick else 1
    steps_for = {"Pendulum-v1": 1000 // div, "HalfCheetah-v5": 300 // div}
    r = args.repeats
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s) in the parent")
    header = (
        f"{'env':<15}{'N':>3} | {'Sync':>8} {'ours Ser':>9} {'TRL Ser':>8} | {'Async':>8} "
        f"{'ours Par':>9} {'ours 2xN/2':>10} {'TRL Par':>8} | {'Ser/Sync':>8} {'Par/Async':>9} "
        f"{'Par/TRL':>8} {'2w/Async':>8}"
    )
    print("frames/s (env steps x N); ratios > 1 mean ours is faster")
    print(header)
    print("-" * len(header))
    for name, steps in steps_for.items():
        for n in (4, 8):
            sync = gym_vector(name, n, steps, r, "sync")
            asyn = gym_vector(name, n, steps, r, "async")
            ser = ours(name, n, steps, r, "serial")
            par = ours(name, n, steps, r, "parallel")
            par2 = ours(name, n, steps, r, "parallel2")
            if args.no_torchrl:
                trl_ser = trl_par = float("nan")
            else:
                trl_ser = torchrl_batched(name, n, max(steps // 4, 20), 1, "serial")
                trl_par = torchrl_batched(name, n, max(steps // 4, 20), 1, "parallel")
            print(
                f"{name:<15}{n:>3} | {sync:>8.0f} {ser:>9.0f} {trl_ser:>8.0f} | {asyn:>8.0f} "
                f"{par:>9.0f} {par2:>10.0f} {trl_par:>8.0f} | {ser / sync:>8.2f} "
                f"{par / asyn:>9.2f} {par / trl_par:>8.2f} {par2 / asyn:>8.2f}",
                flush=True,
            )
    print()
    print("TransformedEnv(StepCounter, RewardSum, DoubleToFloat, ObservationNorm) vs bare env")
    print(f"{'env':<15}{'batch':>14} | {'bare':>8} {'4 transforms':>12} | {'overhead':>8}")
    for name, steps in steps_for.items():
        for n, label in ((1, "single GymEnv"), (8, "ParallelEnv 8")):
            bare, wrapped = transform_overhead(name, n, steps, r)
            print(
                f"{name:<15}{label:>14} | {bare:>8.0f} {wrapped:>12.0f} | "
                f"{(bare / wrapped - 1) * 100:>7.1f}%",
                flush=True,
            )


if __name__ == "__main__":
    main()
