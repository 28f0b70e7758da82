"""The learning gate: the cheapest recipes, fixed seeds, must still learn (nox's ``learning``).

Regressions in learning are bugs, and unit tests do not see them. This trains, in two
parallel processes (one torch thread each):

- PPO on CartPole-v1 with the RL Baselines3 Zoo setting, seed 0: an evaluation must reach
  500 within 100k frames (the run stops at its first 500; ~41k frames here);
- double DQN on CartPole-v1 with the recipe's defaults, seed 0: an evaluation must reach
  475 within 50k frames (the run stops at its first 500; ~28k frames here; every one of 5
  seeds reached 500 within 50k, docs/results.md).

Each check reads the run's own ``metrics.csv``. The bars are the tasks' solved levels,
not this machine's exact curve, so another CPU's float rounding does not fail them.

    uv run python scripts/learning_gate.py              # both gates
    uv run python scripts/learning_gate.py --only dqn   # one of them
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Gate:
    """One recipe run and the bar its evaluations must reach."""

    name: str
    """Name of the gate (``--only``)."""
    recipe: str
    """Recipe name (a script under recipes/) or a path to a script."""
    args: tuple[str, ...]
    """Flags of the run."""
    bar: float
    """Some ``eval/return`` of the run must reach this."""
    within_frames: int
    """... at or before this frame count."""


GATES = (
    Gate(
        "ppo",
        "ppo",
        ("--env", "CartPole-v1", "--total-frames", "100000", "--lr", "1e-3",
         "--gamma", "0.98", "--gae-lambda", "0.8", "--frames-per-batch", "256",
         "--epochs", "20", "--minibatch-size", "256", "--eval-every", "10240",
         "--eval-episodes", "5", "--target-return", "500", "--seed", "0"),
        bar=500.0,
        within_frames=100_000,
    ),
    Gate(
        "dqn",
        "dqn",
        ("--eval-every", "2560", "--target-return", "500", "--seed", "0"),
        bar=475.0,
        within_frames=50_000,
    ),
)  # fmt: skip


def eval_curve(metrics_csv: Path) -> list[tuple[int, float]]:
    """``(frames, eval/return)`` rows of a run's ``metrics.csv``."""
    with metrics_csv.open() as f:
        return [
            (int(row["frames"]), float(row["value"]))
            for row in csv.DictReader(f)
            if row["name"] == "eval/return"
        ]


def check(gate: Gate, curve: list[tuple[int, float]]) -> tuple[bool, str]:
    """Whether ``curve`` passes ``gate``, and a one-line account of why."""
    if not curve:
        return False, f"{gate.name}: no evaluation logged"
    best_frames, best = max(curve, key=lambda row: row[1])
    hits = [frames for frames, value in curve if value >= gate.bar and frames <= gate.within_frames]
    if hits:
        return True, (
            f"{gate.name}: reached {gate.bar:g} at {hits[0]:,} frames "
            f"(bar: within {gate.within_frames:,}); best {best:g}"
        )
    return False, (
        f"{gate.name}: never reached {gate.bar:g} within {gate.within_frames:,} frames; "
        f"best {best:g} at {best_frames:,}, last {curve[-1][1]:g} at {curve[-1][0]:,}"
    )


def run_gates(gates: list[Gate], out: Path) -> list[tuple[bool, str]]:
    """Run every gate's recipe at once (one process each) and check their curves."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    procs = {}
    start = time.perf_counter()
    for gate in gates:
        script = (
            gate.recipe if gate.recipe.endswith(".py") else ROOT / "recipes" / f"{gate.recipe}.py"
        )
        argv = [sys.executable, str(script), *gate.args]
        argv += ["--output-dir", str(out / gate.name)]
        log = (out / f"{gate.name}.log").open("wb")
        procs[gate] = (subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env), log)
    results = []
    for gate, (proc, log) in procs.items():
        code = proc.wait()
        log.close()
        wall = time.perf_counter() - start
        if code != 0:
            tail = (out / f"{gate.name}.log").read_text()[-2000:]
            results.append((False, f"{gate.name}: the run failed (exit {code}):\n{tail}"))
            continue
        ok, why = check(gate, eval_curve(out / gate.name / "metrics.csv"))
        results.append((ok, f"{why} [{wall:.0f} s]"))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=[g.name for g in GATES], action="append")
    parser.add_argument("--output-dir", help="keep the runs there (default: a temporary folder)")
    args = parser.parse_args(argv)
    gates = [g for g in GATES if not args.only or g.name in args.only]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.output_dir or tmp)
        out.mkdir(parents=True, exist_ok=True)
        results = run_gates(gates, out)
    for ok, why in results:
        print(("PASS " if ok else "FAIL ") + why)
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
