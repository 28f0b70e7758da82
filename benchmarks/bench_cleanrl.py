"""CPU time per 100k frames: CleanRL's single-file PPO and SAC, unchanged, against our recipes.

CleanRL's ``ppo_continuous_action.py`` and ``sac_continuous_action.py`` (the hand-written
limit) run as they are, from a CleanRL checkout, in their own Python (``--cleanrl-python``);
``recipes/ppo.py`` and ``recipes/sac.py`` run with the same hyperparameters (networks,
batch, epochs, minibatch, update-to-data ratio). Each run is a separate process timed by
its CPU time (user + system, ``getrusage`` of the children), so other load on the machine
does not count. Every contender runs at two lengths; the difference of the two times over
the difference of frames is the steady-state cost per frame (imports, startup, the random
warm-up frames and compilation cancel), extrapolated to 100k frames.

CleanRL pins Gymnasium 0.29.1, which has no ``HalfCheetah-v5``: its scripts run on
``HalfCheetah-v4`` (the same model file and frame skip; the raw env-step line of the
table checks that the two cost the same). The benchmark prints a message and exits 0
when no CleanRL checkout is found.

    # CleanRL: a checkout holding cleanrl/ and cleanrl_utils/, and a venv with
    # gymnasium==0.29.1, numpy<2, tyro, torch, tensorboard, mujoco
    CLEANRL_DIR=/path/to/cleanrl CLEANRL_PYTHON=/path/to/venv/bin/python \\
        uv run --no-sync python benchmarks/bench_cleanrl.py --algos ppo sac --compile
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NEVER = str(10**12)  # no evaluation or checkpoint inside the timed runs

ENV_STEPS = """
import sys, time, gymnasium as gym, numpy as np
env = gym.make(sys.argv[1]); env.reset(seed=0); env.action_space.seed(0)
n = int(sys.argv[2]); t = time.process_time()
for _ in range(n):
    _, _, term, trunc, _ = env.step(env.action_space.sample())
    if term or trunc:
        env.reset()
print(time.process_time() - t)
"""


def cleanrl_cmd(algo: str, frames: int, env: str, args: argparse.Namespace) -> list[str]:
    script = str(Path(args.cleanrl_dir) / "cleanrl" / f"{algo}_continuous_action.py")
    common = [args.cleanrl_python, script, "--env-id", env, "--total-timesteps", str(frames)]
    if algo == "ppo":  # 1 env x 2048 steps, 32 minibatches of 64, 10 epochs (CleanRL's defaults)
        return [*common, "--no-cuda", "--num-envs", "1", "--num-steps", "2048",
                "--num-minibatches", "32", "--update-epochs", "10"]  # fmt: skip
    return [*common, "--no-cuda", "--batch-size", "256",
            "--learning-starts", str(args.sac_learning_starts)]  # fmt: skip


def ours_cmd(
    algo: str, frames: int, out: Path, args: argparse.Namespace, compile_: bool
) -> list[str]:
    script = str(ROOT / "recipes" / f"{algo}.py")
    common = [sys.executable, script, "--env", "HalfCheetah-v5", "--total-frames", str(frames),
              "--eval-every", NEVER, "--checkpoint-every", NEVER, "--output-dir", str(out),
              "--torch-threads", "1", *(["--compile"] if compile_ else [])]  # fmt: skip
    if algo == "ppo":
        return [*common, "--num-envs", "1", "--frames-per-batch", "2048",
                "--minibatch-size", "64", "--epochs", "10", "--hidden", "64"]  # fmt: skip
    # one gradient step per frame, taken 1000 at a time after each 1000 collected frames
    return [*common, "--batch-size", "256", "--hidden", "256", "--utd-ratio", "1",
            "--frames-per-batch", "1000",
            "--init-random-frames", str(args.sac_learning_starts)]  # fmt: skip


def cpu_seconds(cmd: list[str], cwd: Path, log: Path) -> float:
    """User + system CPU seconds of ``cmd`` and its children, one torch thread."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if "cleanrl" in Path(cmd[1]).parts:
        env["PYTHONPATH"] = str(Path(cmd[1]).parent.parent)  # cleanrl_utils, as in a checkout
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with log.open("w") as f:
        done = subprocess.run(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        tail = log.read_text()[-3000:]
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{tail}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def find_cleanrl(args: argparse.Namespace) -> str | None:
    """Why CleanRL cannot run here, or ``None`` when it can."""
    if not args.cleanrl_dir:
        return "no CleanRL checkout given (--cleanrl-dir or CLEANRL_DIR)"
    for algo in args.algos:
        script = Path(args.cleanrl_dir) / "cleanrl" / f"{algo}_continuous_action.py"
        if not script.is_file():
            return f"{script} not found"
    probe = [args.cleanrl_python, "-c", "import gymnasium, tyro, torch"]
    if subprocess.run(probe, capture_output=True).returncode != 0:
        return f"{args.cleanrl_python} lacks gymnasium, tyro or torch"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algos", nargs="+", choices=["ppo", "sac"], default=["ppo", "sac"])
    parser.add_argument("--cleanrl-dir", default=os.environ.get("CLEANRL_DIR", ""))
    parser.add_argument("--cleanrl-python", default=os.environ.get("CLEANRL_PYTHON", "python"))
    parser.add_argument("--cleanrl-env", default="HalfCheetah-v4", help="id in CleanRL's venv")
    parser.add_argument("--ppo-frames", type=int, nargs=2, default=[2048, 12288])
    parser.add_argument("--sac-frames", type=int, nargs=2, default=[2000, 4000])
    parser.add_argument("--sac-learning-starts", type=int, default=1000)
    parser.add_argument("--compile", action="store_true", help="also time ours with --compile")
    parser.add_argument("--repeats", type=int, default=1, help="alternating rounds per length")
    args = parser.parse_args()
    reason = find_cleanrl(args)
    if reason is not None:
        print(f"bench_cleanrl: skipped, CleanRL is not available: {reason}.")
        return
    work = Path(tempfile.mkdtemp(prefix="bench_cleanrl_"))
    steps = 5000
    env_cost = {
        "cleanrl venv " + args.cleanrl_env: [
            args.cleanrl_python,
            "-c",
            ENV_STEPS,
            args.cleanrl_env,
        ],
        "ours HalfCheetah-v5": [sys.executable, "-c", ENV_STEPS, "HalfCheetah-v5"],
    }
    print(f"raw Gymnasium env steps, CPU ms per 1k steps ({steps} random steps):")
    for name, cmd in env_cost.items():
        out = subprocess.run([*cmd, str(steps)], capture_output=True, text=True, check=True)
        print(f"  {name:32}{1000 * float(out.stdout.split()[-1]) / steps * 1000:8.1f}")
    contenders = ["cleanrl", "ours"] + (["ours --compile"] if args.compile else [])
    for algo in args.algos:
        lengths = args.ppo_frames if algo == "ppo" else args.sac_frames
        times: dict[str, dict[int, list[float]]] = {c: {n: [] for n in lengths} for c in contenders}
        for r in range(args.repeats):
            order = contenders if r % 2 == 0 else contenders[::-1]
            for n in lengths:
                for who in order:
                    out = work / f"{algo}_{who.replace(' --', '_')}_{n}_{r}"
                    out.mkdir()
                    if who == "cleanrl":
                        cmd = cleanrl_cmd(algo, n, args.cleanrl_env, args)
                    else:
                        cmd = ours_cmd(algo, n, out / "run", args, compile_=who != "ours")
                    times[who][n].append(cpu_seconds(cmd, out, out / "log.txt"))
                    print(f"  {algo} {who}, {n} frames: {times[who][n][-1]:.1f} s", flush=True)
        n1, n2 = lengths
        print(f"\n{algo.upper()} HalfCheetah, CPU s per 100k frames: (run of {n2} frames - run of "
              f"{n1}) / {n2 - n1} x 100k, {args.repeats} alternating round(s):")  # fmt: skip
        per_100k = {}
        for who in contenders:
            pairs = zip(times[who][n1], times[who][n2], strict=True)
            rounds = [(t2 - t1) / (n2 - n1) * 100_000 for t1, t2 in pairs]
            per_100k[who] = sum(rounds) / len(rounds)
            each = ", ".join(f"{r:.1f}" for r in rounds)
            print(f"  {who:16}{per_100k[who]:10.1f} s   (mean of rounds: {each})")
        for who in contenders[1:]:
            print(f"  {who} / cleanrl: {per_100k[who] / per_100k['cleanrl']:.2f}x")
        if args.compile:
            gain = per_100k["ours"] / per_100k["ours --compile"]
            print(f"  ours / ours --compile: {gain:.2f}x faster with --compile")
    print(f"\nlogs: {work}")


if __name__ == "__main__":
    main()
