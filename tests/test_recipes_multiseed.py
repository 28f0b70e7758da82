"""The multi-seed tool: its statistics against hand computations, its curve alignment and files."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import _aggregate as agg
import multiseed
import numpy as np
import pytest
import scipy.stats


def test_iqm_is_the_mean_of_the_middle_half_by_hand() -> None:
    # 8 scores: drop the 2 lowest and the 2 highest, average the 4 in the middle
    scores = np.array([100.0, 1.0, 7.0, 3.0, 5.0, -50.0, 4.0, 6.0])
    assert agg.iqm(scores) == pytest.approx((3.0 + 4.0 + 5.0 + 6.0) / 4)
    # 5 scores: floor(0.25 * 5) = 1 dropped at each end
    assert agg.iqm(np.array([0.0, 10.0, 20.0, 30.0, 1000.0])) == pytest.approx(20.0)
    assert agg.mean(np.array([1.0, 2.0, 6.0])) == pytest.approx(3.0)


def test_mean_and_iqm_pool_every_run_and_task() -> None:
    scores = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
    assert agg.mean(scores) == pytest.approx(scores.mean())
    assert agg.iqm(scores) == pytest.approx(scipy.stats.trim_mean(scores.ravel(), 0.25))


def test_bootstrap_ci_of_the_mean_matches_the_exact_bootstrap_distribution() -> None:
    # four runs [0, 0, 0, 10]: a resample's mean is 2.5 * K, K ~ Binomial(4, 1/4) tens drawn.
    # P(K=0)=.316, P(K<=1)=.738, P(K<=2)=.949, P(K<=3)=.996: the 2.5% quantile is 0 and
    # the 97.5% quantile is 7.5 (K=3), far from the boundaries, so any seed gives them.
    scores = np.array([0.0, 0.0, 0.0, 10.0])
    for seed in range(3):
        assert agg.bootstrap_ci(scores, agg.mean, reps=20_000, seed=seed) == (0.0, 7.5)
    replicates = agg.bootstrap_replicates(scores, agg.mean, reps=40_000, seed=1)
    exact = {0.0: 81 / 256, 2.5: 108 / 256, 5.0: 54 / 256, 7.5: 12 / 256, 10.0: 1 / 256}
    for value, p in exact.items():
        assert np.mean(replicates == value) == pytest.approx(p, abs=0.01)


def test_bootstrap_is_stratified_by_task() -> None:
    # task 0 runs [0, 10], task 1 runs [5, 5]: resampling within each task gives overall
    # means (m0 + 5) / 2 with m0 in {0, 5, 10} w.p. 1/4, 1/2, 1/4, i.e. 2.5, 5, 7.5; a
    # bootstrap that pooled the four cells would also give 0 and 10 (e.g. four 0s / 10s)
    scores = np.array([[0.0, 5.0], [10.0, 5.0]])
    replicates = agg.bootstrap_replicates(scores, agg.mean, reps=20_000, seed=0)
    assert set(np.unique(replicates)) == {2.5, 5.0, 7.5}
    assert np.mean(replicates == 5.0) == pytest.approx(0.5, abs=0.02)


def test_bootstrap_is_a_function_of_its_seed_and_the_interval_covers_the_estimate() -> None:
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(10, 3))
    a = agg.bootstrap_replicates(scores, agg.iqm, reps=500, seed=7)
    assert np.array_equal(a, agg.bootstrap_replicates(scores, agg.iqm, reps=500, seed=7))
    summary = agg.summarize(scores, reps=500)
    for name in ("mean", "iqm"):
        assert summary[f"{name}_low"] <= summary[name] <= summary[f"{name}_high"]
    wide = agg.bootstrap_ci(scores, agg.mean, reps=500, confidence=0.99)
    narrow = agg.bootstrap_ci(scores, agg.mean, reps=500, confidence=0.5)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]


@pytest.mark.parametrize(
    ("scores", "match"),
    [(np.zeros((0, 1)), "at least one run"), (np.array([1.0, math.nan]), "NaN")],
)
def test_bad_scores_are_refused(scores: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        agg.mean(scores)
    with pytest.raises(ValueError, match="confidence"):
        agg.bootstrap_ci(np.ones(3), agg.mean, confidence=1.5)


def test_align_holds_the_last_value_and_is_nan_before_the_first() -> None:
    curves = {
        0: (np.array([10, 20, 30]), np.array([1.0, 2.0, 3.0])),
        1: (np.array([20, 10]), np.array([5.0, 4.0])),  # stopped early, logged out of order
    }
    grid, table = multiseed.align(curves)
    assert grid.tolist() == [10, 20, 30]
    assert table.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 5.0]]
    grid, table = multiseed.align({0: (np.array([20]), np.array([7.0])), 1: curves[0]})
    assert np.isnan(table[0, 0]) and table[0, 1:].tolist() == [7.0, 7.0]
    assert multiseed.first_reach(np.array([1, 2, 3]), np.array([0.0, 5.0, 9.0]), 5.0) == 2
    assert multiseed.first_reach(np.array([1]), np.array([0.0]), 5.0) is None


def _write_metrics(path: Path, rows: list[tuple[int, str, float]]) -> None:
    path.parent.mkdir(parents=True)
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([("frames", "name", "value"), *rows])


def test_aggregate_writes_curves_summary_and_plot(tmp_path: Path) -> None:
    finals = [500.0, 500.0, 120.0, 480.0]
    for seed, final in enumerate(finals):
        rows = [(100, "loss", 1.0), (100, "eval/return", 10.0 + seed), (200, "eval/return", final)]
        _write_metrics(tmp_path / f"seed_{seed}" / "metrics.csv", rows)
    cfg = multiseed.parse_config(
        multiseed.Config,
        ["--aggregate-only", "--threshold", "475", "--reps", "300", "--output-dir", str(tmp_path)],
    )
    summary = multiseed.main(["--aggregate-only", "--threshold", "475", "--reps", "300",
                              "--output-dir", str(tmp_path)])  # fmt: skip
    assert cfg.aggregate_only and summary["final"] == dict(enumerate(finals))
    assert summary["first_frame_at_threshold"] == {0: 200, 1: 200, 2: None, 3: 200}
    assert summary["final_at_threshold"] == 3
    final = summary["final_aggregate"]
    assert final["mean"] == pytest.approx(np.mean(finals))
    assert final["iqm"] == pytest.approx((480.0 + 500.0) / 2)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["final"] == {str(k): v for k, v in enumerate(finals)}
    with (tmp_path / "aggregate.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["frames"]) for r in rows] == [100, 200]
    assert float(rows[0]["mean"]) == pytest.approx(11.5)
    assert (tmp_path / "curves.csv").read_text().count("\n") == 1 + 2 * len(finals)
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_aggregate_names_what_is_missing(tmp_path: Path) -> None:
    cfg = multiseed.Config(output_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no seed_"):
        multiseed.aggregate(cfg, tmp_path)
    _write_metrics(tmp_path / "seed_0" / "metrics.csv", [(1, "loss", 0.0)])
    with pytest.raises(ValueError, match="no 'eval/return' rows"):
        multiseed.aggregate(cfg, tmp_path)
    with pytest.raises(FileNotFoundError, match="no script"):
        multiseed.recipe_script("no_such_recipe")


def test_run_seeds_runs_each_seed_in_its_own_process(tmp_path: Path) -> None:
    script = tmp_path / "fake.py"
    script.write_text(
        "import sys, pathlib, os\n"
        "seed = int(sys.argv[sys.argv.index('--seed') + 1])\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--output-dir') + 1]); out.mkdir(parents=True)\n"
        "extra = sys.argv[sys.argv.index('--output-dir') + 2:]\n"
        "(out / 'metrics.csv').write_text(f'frames,name,value\\n5,eval/return,{seed}\\n')\n"
        "print(extra, os.environ['OMP_NUM_THREADS'])\n"
        "sys.exit(3 if seed == 12 else 0)\n"
    )
    argv = ["--recipe", str(script), "--seeds", "3", "--first-seed", "10", "--jobs", "2",
            "--recipe-args", "--env 'A B'", "--reps", "50", "--output-dir", str(tmp_path / "o")]  # fmt: skip
    with pytest.raises(RuntimeError, match=r"\{12: 3\}"):
        multiseed.main(argv)
    assert (tmp_path / "o" / "seed_10.log").read_text().strip() == "['--env', 'A B'] 1"
    summary = multiseed.main([*argv, "--aggregate-only"])
    assert summary["final"] == {10: 10.0, 11: 11.0, 12: 12.0}
