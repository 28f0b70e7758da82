"""HalfCheetah env-steps/s: native ``rl_envs.HalfCheetahEnv`` vs Gymnasium vector envs vs raw MuJoCo.

Run: ``.venv/bin/python benchmarks/bench_mujoco_native.py`` (``--quick`` divides the
step counts by 5; ``--mjx`` adds the JAX backend, whose first call compiles for minutes
on CPU). Prints env-steps/s (one env step = 5 physics steps) and ratios, for
``N = 1, 16, 64`` (``--sizes``):

* ``ours (t threads)``: ``HalfCheetahEnv(num_envs=N, num_threads=t).rollout(T)`` with
  random actions drawn from its spec (TensorDicts, done flags, auto-reset included);
* ``gym sync`` / ``gym async``: ``gymnasium.make_vec("HalfCheetah-v5", N,
  vectorization_mode="sync" | "async")`` stepped with ``action_space.sample()``;
* ``torchrl GymEnv``: TorchRL 0.14's ``GymEnv("HalfCheetah-v5", num_envs=N)`` rollout,
  when torchrl is installed (TorchRL 0.14 has no native HalfCheetah to compare with);
* ``raw mj_step``: the physics limit in Python, ``N`` ``MjData`` and a loop that sets
  ``ctrl`` and calls ``mj_step(m, d, 5)`` (no observation, reward or reset);
* ``mujoco.rollout``: the C++ limit, one call for ``N x T`` env steps
  (``nthread`` = 1 and 2).

Two figures per contender: env-steps per wall-clock second and per CPU second of this
process (``time.process_time``: robust to other load on a shared machine, but blind to
worker processes and to the speed-up of extra threads, so shown for single-threaded
contenders only). Each figure is the best of ``--repeats`` short runs (about 8k env steps), contenders
interleaved: on a shared machine the best run is the one least disturbed by other
load, so compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable

import mujoco
import numpy as np
import torch
from mujoco import rollout as mj_rollout

from rl_envs import HalfCheetahEnv
from rl_envs.mujoco.locomotion import gymnasium_asset

warnings.filterwarnings("ignore")
torch.set_num_threads(1)

FRAME_SKIP = 5


def _rates(env_steps: int, t0: float, c0: float) -> tuple[float, float]:
    """``(env-steps per wall-clock second, env-steps per CPU second of this process)``."""
    return env_steps / (time.perf_counter() - t0), env_steps / max(time.process_time() - c0, 1e-9)


def ours(
    n: int, steps: int, threads: int, backend: str = "mujoco"
) -> Callable[[], tuple[float, float]]:
    env = HalfCheetahEnv(num_envs=n, seed=0, num_threads=threads, backend=backend)
    env.rollout(2)  # warm up (and compile, for mjx)

    def run() -> float:
        t0, c0 = time.perf_counter(), time.process_time()
        env.rollout(steps, break_when_any_done=False)
        return _rates(n * steps, t0, c0)

    return run


def gym_vec(n: int, steps: int, mode: str) -> Callable[[], tuple[float, float]]:
    import gymnasium as gym

    envs = gym.make_vec("HalfCheetah-v5", num_envs=n, vectorization_mode=mode)
    envs.reset(seed=0)
    envs.action_space.seed(0)

    def run() -> float:
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            envs.step(envs.action_space.sample())
        return _rates(n * steps, t0, c0)

    run.close = envs.close  # type: ignore[attr-defined]
    return run


def torchrl_gym(n: int, steps: int) -> Callable[[], tuple[float, float]] | None:
    try:
        from torchrl.envs import GymEnv as TorchRLGymEnv
    except ImportError:
        return None
    env = TorchRLGymEnv("HalfCheetah-v5", num_envs=n) if n > 1 else TorchRLGymEnv("HalfCheetah-v5")

    def run() -> float:
        t0, c0 = time.perf_counter(), time.process_time()
        env.rollout(steps, break_when_any_done=False)
        return _rates(n * steps, t0, c0)

    return run


def raw_mj_step(n: int, steps: int) -> Callable[[], tuple[float, float]]:
    model = mujoco.MjModel.from_xml_path(str(gymnasium_asset("half_cheetah.xml")))
    datas = [mujoco.MjData(model) for _ in range(n)]
    ctrl = np.random.default_rng(0).uniform(-1, 1, (steps, n, model.nu))

    def run() -> float:
        t0, c0 = time.perf_counter(), time.process_time()
        for t in range(steps):
            for i, d in enumerate(datas):
                d.ctrl[:] = ctrl[t, i]
                mujoco.mj_step(model, d, FRAME_SKIP)
        return _rates(n * steps, t0, c0)

    return run


def rollout_limit(n: int, steps: int, nthread: int) -> Callable[[], tuple[float, float]]:
    model = mujoco.MjModel.from_xml_path(str(gymnasium_asset("half_cheetah.xml")))
    datas = [mujoco.MjData(model) for _ in range(nthread)]
    state0 = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(model, datas[0], state0, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    init = np.tile(state0, (n, 1))
    ctrl = np.repeat(
        np.random.default_rng(0).uniform(-1, 1, (n, steps, 1, model.nu)), FRAME_SKIP, 2
    )
    ctrl = ctrl.reshape(n, steps * FRAME_SKIP, model.nu)

    def run() -> float:
        t0, c0 = time.perf_counter(), time.process_time()
        mj_rollout.rollout(model, datas, init, ctrl)
        return _rates(n * steps, t0, c0)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--mjx", action="store_true", help="add the mjx backend (slow compile)")
    args = parser.parse_args()
    div = 5 if args.quick else 1
    cpus = len(os.sched_getaffinity(0))
    print(
        f"HalfCheetah-v5, env-steps/s (frame_skip={FRAME_SKIP}); {cpus} CPUs; mujoco "
        f"{mujoco.__version__}; best of {args.repeats}"
    )
    for n in args.sizes:
        steps = max(20, (8_000 // n if n > 1 else 2_000) // div)
        cases: dict[str, Callable[[], tuple[float, float]]] = {
            "ours (1 thread)": ours(n, steps, 1),
            "ours (2 threads)": ours(n, steps, 2),
            "gym sync": gym_vec(n, steps, "sync"),
            "gym async": gym_vec(n, steps, "async"),
            "raw mj_step": raw_mj_step(n, steps),
            "mujoco.rollout (1 thread)": rollout_limit(n, steps, 1),
            "mujoco.rollout (2 threads)": rollout_limit(n, steps, 2),
        }
        if n == 1:
            del cases["ours (2 threads)"], cases["mujoco.rollout (2 threads)"]
        trl = torchrl_gym(n, steps)
        if trl is not None:
            cases["torchrl 0.14 GymEnv"] = trl
        if args.mjx:
            cases["ours mjx"] = ours(n, steps, 1, backend="mjx")
        wall = dict.fromkeys(cases, 0.0)
        cpu = dict.fromkeys(cases, 0.0)
        for _ in range(args.repeats):
            for name, run in cases.items():
                w, c = run()
                wall[name], cpu[name] = max(wall[name], w), max(cpu[name], c)
        for run in cases.values():
            getattr(run, "close", lambda: None)()
        note = "" if trl else "; torchrl not installed: its column is skipped"
        print(f"\nN={n} ({steps} steps each){note}")
        print(f"  {'':30s} {'wall':>9s} {'per CPU s':>10s}")
        for name in cases:
            # worker processes (gym async) and extra threads do not count in CPU time
            shown = "-" if "async" in name or "2 threads" in name else f"{cpu[name]:10.0f}"
            print(f"  {name:30s} {wall[name]:9.0f} {shown:>10s}")
        gym_best = max(wall["gym sync"], wall["gym async"])
        ours_best = max(v for k, v in wall.items() if k.startswith("ours ("))
        limit = max(v for k, v in wall.items() if k.startswith("mujoco.rollout"))
        print(f"  wall: ours best / gym best         {ours_best / gym_best:6.2f}x")
        print(f"  wall: ours best / raw mj_step      {ours_best / wall['raw mj_step']:6.2f}")
        print(f"  wall: ours best / mujoco.rollout   {ours_best / limit:6.2f}")
        one = "ours (1 thread)"
        print(f"  CPU:  ours 1 thread / gym sync     {cpu[one] / cpu['gym sync']:6.2f}x")
        print(f"  CPU:  ours 1 thread / raw mj_step  {cpu[one] / cpu['raw mj_step']:6.2f}")
        print(
            f"  CPU:  ours 1 thread / rollout (1t) {cpu[one] / cpu['mujoco.rollout (1 thread)']:6.2f}"
        )
        if trl is not None:
            ratio = cpu[one] / cpu["torchrl 0.14 GymEnv"]
            print(f"  CPU:  ours 1 thread / torchrl      {ratio:6.2f}x")


if __name__ == "__main__":
    main()
