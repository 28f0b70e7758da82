"""conformance/run.py keeps a file's saved result when a run of it measured nothing."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("conformance_run", ROOT / "conformance" / "run.py")
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)


def summary(passed: int, killed: bool) -> dict:
    return {"file": "envs/test_x.py", "area": "envs", "passed": passed, "failed": 0,
            "errors": 0, "not_run": 0, "skipped": 0, "out_of_scope": 0,
            "collection_error": False, "killed_by_budget": killed, "wall_s": 1.0,
            "failures": [], "tail": "", "missing_seen": [], "blocked_by": {},
            "api_gaps": {}}  # fmt: skip


@pytest.fixture
def args() -> argparse.Namespace:
    return argparse.Namespace(save="after", src=None, budget=10.0, failures=False)


def test_a_file_killed_before_any_test_reported_keeps_its_saved_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: argparse.Namespace,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    run._print_and_save(summary(7, killed=False), {}, args, [])
    run._print_and_save(summary(0, killed=True), {}, args, [])
    saved = json.loads((tmp_path / "after.json").read_text())
    assert saved["files"]["envs/test_x.py"]["passed"] == 7
    assert "not saved" in capsys.readouterr().out


def test_a_file_killed_after_some_tests_reported_is_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: argparse.Namespace
) -> None:
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    run._print_and_save(summary(7, killed=False), {}, args, [])
    run._print_and_save(summary(3, killed=True), {}, args, [])
    saved = json.loads((tmp_path / "after.json").read_text())
    assert saved["files"]["envs/test_x.py"]["passed"] == 3
