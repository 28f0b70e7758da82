"""Batched env speed: rl_envs SerialEnv / ParallelEnv vs Gymnasium's vector envs (the
raw limit) vs TorchRL 0.14's SerialEnv / ParallelEnv; and the cost of four cheap
transforms (StepCounter, RewardSum, DoubleToFloat, ObservationNorm) on a rollout.

Run: ``.venv-bench/bin/python benchmarks/bench_batched_envs.py`` (``--quick`` divides
the step counts by 5). Prints frames/s (env steps x batch) and ratios.

Every contender steps N copies of the env with random actions, auto-resetting finished
sub-envs, and is timed after start-up and a warm-up. Contenders are built first, then
run in turn, ``--repeats`` rounds; each figure is the best round. The machine may have
few cores shared with other jobs: compare ratios within one run, not absolute numbers.
"""

from __future__ import annotations

import argparse
import functools
import time
import warnings

import gymnasium as gym
import torch

import rl_envs

warnings.filterwarnings("ignore")
torch.set_num_threads(1)


# ---------------------------------------------------------------- contenders
class GymVector:
    """Gymnasium's SyncVectorEnv / AsyncVectorEnv stepped with sampled actions."""

    def __init__(self, name: str, n: int, mode: str) -> None:
        fns = [functools.partial(gym.make, name)] * n
        vec = gym.vector.SyncVectorEnv if mode == "sync" else gym.vector.AsyncVectorEnv
        self.envs = vec(fns)
        self.envs.reset(seed=0)
        self.envs.action_space.seed(0)
        self.run(10)

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.envs.step(self.envs.action_space.sample())

    def close(self) -> None:
        self.envs.close()


class Rollout:
    """A TensorDict env (ours or TorchRL's) doing ``rollout(steps)`` with random actions."""

    def __init__(self, env) -> None:
        self.env = env
        env.set_seed(0)
        self.run(10)

    def run(self, steps: int) -> None:
        self.env.rollout(steps, break_when_any_done=False)

    def close(self) -> None:
        self.env.close()


def contenders(name: str, n: int, with_torchrl: bool) -> dict[str, object]:
    make = functools.partial(rl_envs.GymEnv, name, validate_actions=False)
    out: dict[str, object] = {
        "sync": GymVector(name, n, "sync"),
        "async": GymVector(name, n, "async"),
        "ser": Rollout(rl_envs.SerialEnv(n, make)),
        "par": Rollout(rl_envs.ParallelEnv(n, make)),
        "par2": Rollout(rl_envs.ParallelEnv(2, make, envs_per_worker=n // 2)),
    }
    if with_torchrl:
        from torchrl.envs import GymEnv, ParallelEnv, SerialEnv

        trl_make = functools.partial(GymEnv, name)
        out["trl_ser"] = Rollout(SerialEnv(n, trl_make))
        out["trl_par"] = Rollout(ParallelEnv(n, trl_make))
    return out


def measure(
    runners: dict[str, object],
    n: int,
    steps: dict[str, int],
    repeats: int,
    clock=time.perf_counter,
) -> dict[str, float]:
    """Best frames/s of each runner over ``repeats`` rounds, runners interleaved."""
    best = dict.fromkeys(runners, 0.0)
    for _ in range(repeats):
        for key, runner in runners.items():
            t0 = clock()
            runner.run(steps[key])
            best[key] = max(best[key], n * steps[key] / (clock() - t0))
    return best


# --------------------------------------------------------------- transforms
def four_transforms() -> rl_envs.Compose:
    return rl_envs.Compose(
        rl_envs.StepCounter(),
        rl_envs.RewardSum(),
        rl_envs.DoubleToFloat(),
        rl_envs.ObservationNorm(loc=0.0, scale=1.0, in_keys=["observation"]),
    )


def transform_overhead(name: str, n: int, steps: int, repeats: int) -> tuple[float, float]:
    """(bare fps, transformed fps), best of ``repeats`` interleaved rounds."""

    def make_base():
        if n == 1:
            return rl_envs.GymEnv(name, validate_actions=False)
        return rl_envs.ParallelEnv(
            2,
            functools.partial(rl_envs.GymEnv, name, validate_actions=False),
            envs_per_worker=n // 2,
        )

    runners = {
        "bare": Rollout(make_base()),
        "wrapped": Rollout(rl_envs.TransformedEnv(make_base(), four_transforms())),
    }
    # in-process: CPU time (robust to other jobs on the machine); with workers: wall time
    clock = time.process_time if n == 1 else time.perf_counter
    best = measure(runners, n, {"bare": steps, "wrapped": steps}, repeats, clock)
    for runner in runners.values():
        runner.close()
    return best["bare"], best["wrapped"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
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
            runners = contenders(name, n, not args.no_torchrl)
            trl_steps = max(steps // 5, 20)  # TorchRL is slow: fewer steps, same frames/s
            per = {k: (trl_steps if k.startswith("trl") else steps) for k in runners}
            fps = measure(runners, n, per, r)
            for runner in runners.values():
                runner.close()
            nan = float("nan")
            sync, asyn, ser, par, par2 = (fps[k] for k in ("sync", "async", "ser", "par", "par2"))
            trl_ser, trl_par = fps.get("trl_ser", nan), fps.get("trl_par", nan)
            print(
                f"{name:<15}{n:>3} | {sync:>8.0f} {ser:>9.0f} {trl_ser:>8.0f} | {asyn:>8.0f} "
                f"{par:>9.0f} {par2:>10.0f} {trl_par:>8.0f} | {ser / sync:>8.2f} "
                f"{par / asyn:>9.2f} {par / trl_par:>8.2f} {par2 / asyn:>8.2f}",
                flush=True,
            )
    print()
    print(
        "TransformedEnv(StepCounter, RewardSum, DoubleToFloat, ObservationNorm) vs bare env "
        "(single env: CPU time; ParallelEnv: wall time)"
    )
    print(f"{'env':<15}{'batch':>14} | {'bare':>8} {'4 transforms':>12} | {'overhead':>8}")
    for name, steps in steps_for.items():
        for n, label in ((1, "single GymEnv"), (8, "ParallelEnv 8")):
            bare, wrapped = transform_overhead(name, n, steps, 2 * r)
            print(
                f"{name:<15}{label:>14} | {bare:>8.0f} {wrapped:>12.0f} | "
                f"{(bare / wrapped - 1) * 100:>7.1f}%",
                flush=True,
            )


if __name__ == "__main__":
    main()
