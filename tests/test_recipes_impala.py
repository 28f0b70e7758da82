"""recipes/impala.py end to end: async workers, V-trace updates, the policy lag it logs."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "recipes"))


def test_impala_runs_and_logs_the_policy_lag_of_each_update(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("impala", ROOT / "recipes" / "impala.py")
    impala = importlib.util.module_from_spec(spec)
    sys.modules["impala"] = impala  # dataclasses resolve field types through sys.modules
    spec.loader.exec_module(impala)
    summary = impala.main(["--smoke", "--total-frames", "1024", "--eval-every", "1024",
                           "--anneal-lr", "--lr", "0.004", "--output-dir", str(tmp_path)])  # fmt: skip
    assert summary["frames"] == 1024
    with (tmp_path / "metrics.csv").open() as f:
        lags = [float(r["value"]) for r in csv.DictReader(f) if r["name"] == "policy_lag"]
    # 1024 frames = 16 worker batches of 64 = 4 updates of 4 batches
    assert len(lags) == 4
    # a batch is collected by weights at most as new as the learner's
    assert all(lag >= 0 for lag in lags)
    # --anneal-lr: after the update at frame f the rate is lr * (1 - f / total): 0 at the end
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert state["optim"]["param_groups"][0]["lr"] == 0.0
