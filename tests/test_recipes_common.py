"""The recipes' shared plumbing: config flags, RNG-exact checkpoints, logs and plots."""

from __future__ import annotations

import csv
import importlib.util
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "recipes"))
_spec = importlib.util.spec_from_file_location("_common", ROOT / "recipes" / "_common.py")
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)


@dataclass
class ToyConfig:
    """A toy recipe."""

    env: str = "CartPole-v1"
    """Gymnasium id."""
    total_frames: int = 1000
    """Frames to collect
    in total."""
    lr: float = 3e-4
    """Learning rate."""
    anneal: bool = True
    """Anneal the learning rate."""
    smoke: bool = False
    resume: str = ""

    SMOKE: ClassVar[dict[str, object]] = {"total_frames": 10}


def test_field_docs_reads_the_docstring_under_each_field() -> None:
    docs = common.field_docs(ToyConfig)
    assert docs["env"] == "Gymnasium id."
    assert docs["total_frames"] == "Frames to collect in total."
    assert "smoke" not in docs


def test_parse_config_flags_types_and_smoke_overrides() -> None:
    cfg = common.parse_config(ToyConfig, ["--lr", "0.1", "--anneal", "false", "--env", "X"])
    assert (cfg.lr, cfg.anneal, cfg.env, cfg.total_frames) == (0.1, False, "X", 1000)
    assert common.parse_config(ToyConfig, ["--smoke", "true"]).total_frames == 10
    explicit = common.parse_config(ToyConfig, ["--smoke", "1", "--total-frames", "7"])
    assert explicit.total_frames == 7
    with pytest.raises(SystemExit):
        common.parse_config(ToyConfig, ["--anneal", "maybe"])


def test_help_lists_every_field_with_its_doc(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        common.parse_config(ToyConfig, ["--help"])
    out = capsys.readouterr().out
    assert "--total-frames" in out and "Frames to collect in total." in out


def test_checkpoint_round_trip_restores_every_rng(tmp_path: Path) -> None:
    common.seed_everything(3)
    path = tmp_path / "ckpt" / "last.pt"
    common.save_checkpoint(path, {"frames": 5})
    expected = (random.random(), np.random.rand(), torch.rand(()).item())
    random.random(), np.random.rand(), torch.rand(())  # move every generator on
    state = common.load_checkpoint(path)
    assert state["frames"] == 5
    assert (random.random(), np.random.rand(), torch.rand(()).item()) == expected
    assert not path.with_suffix(".pt.tmp").exists()
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        common.load_checkpoint(tmp_path / "missing.pt")


def test_logger_writes_csv_and_the_plot_reads_it(tmp_path: Path) -> None:
    logger = common.RunLogger(tmp_path, total_frames=100)
    logger.log(10, **{"train/return": 1.0, "loss": 0.5})
    logger.log(20, **{"train/return": 3.0})
    logger.advance(20)
    logger.close()
    rows = list(csv.reader((tmp_path / "metrics.csv").read_text().splitlines()))
    assert rows == [
        ["frames", "name", "value"],
        ["10", "train/return", "1.0"],
        ["10", "loss", "0.5"],
        ["20", "train/return", "3.0"],
    ]
    common.plot_learning_curve(tmp_path / "metrics.csv", tmp_path / "curve.png", "toy")
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    line = common.write_summary(tmp_path, frames=20, final_eval_return=3.0)
    assert (tmp_path / "summary.json").read_text().strip() == line
