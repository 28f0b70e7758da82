"""Run one recipe over several seeds in parallel processes and aggregate the learning curves.

Each seed is a separate process (``python recipes/<recipe>.py --seed S --output-dir
<output_dir>/seed_S <recipe_args>``, one torch thread, ``OMP_NUM_THREADS=1``), at most
``jobs`` at once: the default 2 fits a 2-core machine. Each run writes its own
``metrics.csv``; from them this script writes, under ``output_dir``:

- ``curves.csv``: every seed's ``metric`` against frames (tidy: frames, seed, value);
- ``aggregate.csv``: per evaluation point, mean and interquartile mean (IQM) over seeds
  with stratified-bootstrap 95% intervals (Agarwal et al., 2021; ``_aggregate.py``);
- ``summary.json``: the same for the final score of each seed, plus each seed's final
  score and, with ``--threshold``, the first frame at which it reached the threshold;
- ``curves.png``: the seeds' curves, the mean with its interval and the IQM.

A seed whose run stopped early (``--target-return``) holds its last value afterwards.

    uv run recipes/multiseed.py --recipe dqn --seeds 5 --threshold 500
    uv run recipes/multiseed.py --recipe ppo --seeds 3 --recipe-args "--env CartPole-v1"
    uv run recipes/multiseed.py --recipe dqn --aggregate-only --output-dir runs/multiseed/dqn
    uv run recipes/multiseed.py --smoke
"""

from __future__ import annotations

import csv
import json
import math
import os
import shlex
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

from _config import parse_config

RECIPES_DIR = Path(__file__).resolve().parent


@dataclass
class Config:
    """Run one recipe over several seeds and aggregate their curves (mean, IQM, 95% CIs)."""

    recipe: str = "dqn"
    """Recipe to run: a name under recipes/ (dqn, ppo, ...) or a path to a script."""
    seeds: int = 5
    """Number of seeds (first_seed, first_seed + 1, ...)."""
    first_seed: int = 0
    """First seed."""
    jobs: int = 2
    """Runs at once (each one process with one thread)."""
    recipe_args: str = ""
    """Flags passed to every run, as one shell-quoted string ("--env CartPole-v1")."""
    metric: str = "eval/return"
    """Series of metrics.csv to aggregate."""
    threshold: float = math.nan
    """Report the first frame at which each seed's metric reaches this (nan: not reported)."""
    reps: int = 5000
    """Bootstrap replicates per interval."""
    confidence: float = 0.95
    """Coverage of the bootstrap intervals."""
    aggregate_only: bool = False
    """Do not run anything: aggregate the seed_* runs already under output_dir."""
    output_dir: str = "runs/multiseed"
    """Folder of the runs (seed_S/) and of the aggregate files."""
    smoke: bool = False
    """Run a tiny budget (two --smoke runs of the recipe) to check the tool end to end."""

    SMOKE: ClassVar[dict[str, object]] = {"seeds": 2, "recipe_args": "--smoke", "reps": 200}


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (numpy and rliable come after the flags are parsed: --help is instant)
import numpy as np
from _aggregate import summarize


def recipe_script(recipe: str) -> Path:
    """The script of a recipe name (``dqn`` -> ``recipes/dqn.py``) or path."""
    path = Path(recipe)
    if path.suffix != ".py":
        path = RECIPES_DIR / f"{recipe}.py"
    if not path.is_file():
        known = sorted(p.stem for p in RECIPES_DIR.glob("*.py") if not p.stem.startswith("_"))
        raise FileNotFoundError(f"--recipe {recipe}: no script {path}; recipes here: {known}")
    return path


def run_seeds(cfg: Config, out: Path) -> dict[int, int]:
    """Run every seed, ``cfg.jobs`` at a time; return each seed's exit code.

    Each run's stdout and stderr go to ``out/seed_S.log``.
    """
    script = recipe_script(cfg.recipe)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    pending = list(range(cfg.first_seed, cfg.first_seed + cfg.seeds))
    running: dict[int, tuple[subprocess.Popen[bytes], object]] = {}
    codes: dict[int, int] = {}
    out.mkdir(parents=True, exist_ok=True)
    while pending or running:
        while pending and len(running) < max(cfg.jobs, 1):
            seed = pending.pop(0)
            argv = [sys.executable, str(script), "--seed", str(seed)]
            argv += ["--output-dir", str(out / f"seed_{seed}"), *shlex.split(cfg.recipe_args)]
            log = (out / f"seed_{seed}.log").open("wb")
            print(f"[multiseed] seed {seed}: {shlex.join(argv)}", flush=True)
            running[seed] = (
                subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env),
                log,
            )
        time.sleep(0.5)  # runs last minutes: polling costs nothing measurable at this rate
        for seed, (proc, log) in list(running.items()):
            if proc.poll() is not None:
                log.close()  # type: ignore[attr-defined]
                codes[seed] = proc.returncode
                print(f"[multiseed] seed {seed} exited with {proc.returncode}", flush=True)
                del running[seed]
    return codes


def read_curve(csv_path: Path, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """``(frames, values)`` of one series of a recipe's ``metrics.csv`` (frames, name, value)."""
    frames, values = [], []
    with csv_path.open() as f:
        for row in csv.DictReader(f):
            if row["name"] == metric:
                frames.append(int(row["frames"]))
                values.append(float(row["value"]))
    if not frames:
        raise ValueError(
            f"{csv_path}: no {metric!r} rows; is --metric the name of a logged series?"
        )
    return np.array(frames), np.array(values)


def align(curves: dict[int, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Every seed's curve on the union of their frames: ``(grid, values[num_seeds, len(grid)])``.

    At a grid frame a seed takes its last value logged at or before it (so a run that stopped
    early holds its last value); NaN before its first value.
    """
    grid = np.unique(np.concatenate([frames for frames, _ in curves.values()]))
    table = np.full((len(curves), len(grid)), np.nan)
    for row, (frames, values) in enumerate(curves.values()):
        order = np.argsort(frames, kind="stable")
        frames, values = frames[order], values[order]
        pos = np.searchsorted(frames, grid, side="right") - 1
        table[row] = np.where(pos >= 0, values[np.clip(pos, 0, None)], np.nan)
    return grid, table


def first_reach(frames: np.ndarray, values: np.ndarray, threshold: float) -> int | None:
    """The first frame at which ``values >= threshold`` (None if never)."""
    hits = np.flatnonzero(values >= threshold)
    return int(frames[hits[0]]) if len(hits) else None


def aggregate(cfg: Config, out: Path) -> dict[str, object]:
    """Read ``out/seed_*/metrics.csv`` and write curves.csv, aggregate.csv, summary.json, curves.png."""
    runs = sorted(out.glob("seed_*/metrics.csv"), key=lambda p: int(p.parent.name[5:]))
    if not runs:
        raise FileNotFoundError(f"no seed_*/metrics.csv under {out}: run the seeds first")
    curves = {int(p.parent.name[5:]): read_curve(p, cfg.metric) for p in runs}
    grid, table = align(curves)

    with (out / "curves.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["frames", "seed", "value"])
        for seed, (frames, values) in curves.items():
            writer.writerows([int(x), seed, float(y)] for x, y in zip(frames, values, strict=True))

    rows = []
    for j, frame in enumerate(grid):
        column = table[:, j][~np.isnan(table[:, j])]
        stats = summarize(column, reps=cfg.reps, confidence=cfg.confidence)
        rows.append({"frames": int(frame), "seeds": len(column), **stats})
    with (out / "aggregate.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    finals = {seed: float(values[np.argmax(frames)]) for seed, (frames, values) in curves.items()}
    summary: dict[str, object] = {
        "recipe": cfg.recipe,
        "recipe_args": cfg.recipe_args,
        "metric": cfg.metric,
        "seeds": sorted(curves),
        "final": finals,
        "final_frames": {seed: int(frames.max()) for seed, (frames, _) in curves.items()},
        "final_aggregate": summarize(
            np.array(list(finals.values())), reps=cfg.reps, confidence=cfg.confidence
        ),
        "confidence": cfg.confidence,
        "bootstrap_reps": cfg.reps,
    }
    if not math.isnan(cfg.threshold):
        summary["threshold"] = cfg.threshold
        summary["first_frame_at_threshold"] = {
            seed: first_reach(frames, values, cfg.threshold)
            for seed, (frames, values) in curves.items()
        }
        summary["final_at_threshold"] = sum(v >= cfg.threshold for v in finals.values())
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    plot(
        curves, rows, out / "curves.png", f"{Path(cfg.recipe).stem} {cfg.recipe_args}".strip(), cfg
    )
    return summary


def plot(
    curves: dict[int, tuple[np.ndarray, np.ndarray]],
    rows: list[dict[str, float]],
    png_path: Path,
    title: str,
    cfg: Config,
) -> None:
    """Seeds as thin lines, the mean with its bootstrap band, the IQM dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for seed, (frames, values) in curves.items():
        ax.plot(frames, values, lw=0.8, alpha=0.45, label=f"seed {seed}")
    x = [r["frames"] for r in rows]
    ax.plot(x, [r["mean"] for r in rows], color="k", lw=2, label="mean")
    band = [r["mean_low"] for r in rows], [r["mean_high"] for r in rows]
    ax.fill_between(x, *band, color="k", alpha=0.15, label=f"mean {cfg.confidence:.0%} CI")
    ax.plot(x, [r["iqm"] for r in rows], color="tab:red", lw=1.5, ls="--", label="IQM")
    ax.set(xlabel="frames", ylabel=cfg.metric)
    ax.set_title(textwrap.fill(f"{title} ({len(curves)} seeds)", width=90), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    out = Path(cfg.output_dir)
    if not cfg.aggregate_only:
        codes = run_seeds(cfg, out)
        failed = {seed: code for seed, code in codes.items() if code != 0}
        if failed:
            logs = ", ".join(str(out / f"seed_{s}.log") for s in failed)
            raise RuntimeError(f"runs failed (seed: exit code) {failed}; see {logs}")
    summary = aggregate(cfg, out)
    config = {k: None if v != v else v for k, v in asdict(cfg).items()}  # NaN is not JSON
    print(json.dumps({"config": config, **summary}, sort_keys=True))
    return summary


if __name__ == "__main__":
    main()
