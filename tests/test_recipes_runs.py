"""Runs are never lost, and a run says why it stopped (issue 38).

Each run gets its own folder (``runs/<algo>/<start time>``, ``latest`` pointing at it); a
smoke run never touches a real run; reusing a folder that holds a run needs ``--resume`` or
``--overwrite``; every run ends with a final checkpoint and keeps its best evaluation's, both
named in ``summary.json``; Ctrl-C saves and exits 130; ``--help`` answers before torch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import _common as common
import pytest

ROOT = Path(__file__).resolve().parent.parent
RECIPES = sorted(p.stem for p in (ROOT / "recipes").glob("*.py") if not p.stem.startswith("_"))
HEAVY = ("torch", "tensordict", "gymnasium", "rl_envs", "rl_buffers", "rl_modules",
         "rl_collectors", "rl_objectives", "rl_llm")  # fmt: skip

# --help through the script's own entry point, then the heavy modules it imported
_HELP_PROBE = """
import runpy, sys
sys.argv = [{script!r}, "--help"]
sys.path.insert(0, {recipes!r})
try:
    runpy.run_path({script!r}, run_name="__main__")
except SystemExit as exit:
    assert exit.code == 0, exit.code
print(sorted(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize("name", RECIPES)
def test_help_answers_before_any_heavy_import(name: str) -> None:
    script = str(ROOT / "recipes" / f"{name}.py")
    probe = _HELP_PROBE.format(script=script, recipes=str(ROOT / "recipes"), heavy=HEAVY)
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "[]", f"{name} --help imported heavy modules"


def test_preset_help_lists_every_preset_and_what_it_sets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import ppo

    with pytest.raises(SystemExit):
        common.parse_config(ppo.Config, ["--help"])
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines at hyphens
    assert "Presets:zoo-halfcheetah(--envHalfCheetah-v5--num-envs1--total-frames1000000" in text
    assert common.describe_presets({}) == "This recipe has no presets."


# -- run folders ---------------------------------------------------------------------------


def test_runs_get_their_own_folder_and_latest_points_at_the_last_real_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first = common.run_folder(common.RunConfig(run_name="a"), "toy")
    (first / "summary.json").write_text("{}\n")
    second = common.run_folder(common.RunConfig(), "toy")  # named by its start time
    assert first != second and second.parent == Path("runs/toy")
    assert Path("runs/toy/latest").resolve() == second.resolve()

    smoke = common.run_folder(common.RunConfig(smoke=True), "toy")
    assert smoke.name.startswith("smoke-")
    assert Path("runs/toy/latest").resolve() == second.resolve()  # a smoke run leaves it alone
    assert (first / "summary.json").read_text() == "{}\n"


def test_reusing_a_folder_that_holds_a_run_needs_resume_or_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoint.pt").write_bytes(b"old")
    (out / "metrics.csv").write_text("frames,name,value\n")
    (out / "tensorboard").mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(common.RunFolderError) as info:
        common.run_folder(common.RunConfig(output_dir=str(out)), "toy")
    message = str(info.value)
    assert "already holds a run" in message and "--resume" in message and "--overwrite" in message
    assert (out / "checkpoint.pt").read_bytes() == b"old"  # nothing touched

    resumed = common.RunConfig(resume=str(out / "checkpoint.pt"))  # its folder by default
    assert common.run_folder(resumed, "toy") == out.resolve()

    common.run_folder(common.RunConfig(output_dir=str(out), overwrite=True), "toy")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]  # only the run's files go


@pytest.mark.parametrize(
    ("fields", "flag"),
    [({"resume": "c.pt", "overwrite": True}, "--overwrite"), ({"run_name": "a/b"}, "--run-name")],
)
def test_conflicting_run_flags_are_refused_at_parsing(fields: dict[str, object], flag: str) -> None:
    with pytest.raises(ValueError, match=flag):
        common.RunConfig(**fields)  # type: ignore[arg-type]


# -- the end of a run ----------------------------------------------------------------------


def test_keeper_saves_best_and_final_and_says_why_the_run_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    weights = {"w": torch.zeros(2)}
    frames = 0

    def snapshot() -> dict[str, object]:
        return {"net": dict(weights), "frames": frames, "buffer": torch.ones(1000)}

    keeper = common.RunKeeper(tmp_path, common.RunConfig(target_return=5.0), 100, None)
    assert "until eval return >= 5 or 100 frames" in capsys.readouterr().out
    for frames, ret in [(10, 1.0), (20, 3.0), (30, 2.0)]:
        weights["w"] = torch.full((2,), float(frames))
        keeper.evaluated(frames, ret, snapshot)
    frames = 40
    ends = keeper.finish(frames, 6.0, snapshot)
    keeper.announce()

    best = common.read_checkpoint(tmp_path / "best.pt")
    assert best["frames"] == 20 and best["net"]["w"].tolist() == [20.0, 20.0]
    assert "buffer" not in best  # the policy, not the replay buffer
    final = common.read_checkpoint(tmp_path / "checkpoint.pt")
    assert final["frames"] == 40 and final["best"] == {"eval_return": 3.0, "frames": 20}
    assert ends["stop_reason"] == "target_reached"
    assert ends["best_checkpoint"] == {"path": str(tmp_path / "best.pt"), "frames": 20,
                                       "eval_return": 3.0}  # fmt: skip
    assert ends["final_checkpoint"]["path"] == str(tmp_path / "checkpoint.pt")
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("stopped: target reached at 40 frames: eval return 6.0 >= 5")


def test_progress_bar_has_no_total_when_a_target_can_stop_the_run(tmp_path: Path) -> None:
    early = common.RunLogger(tmp_path / "a", 1000, target_return=100.0)
    budget = common.RunLogger(tmp_path / "b", 1000)
    assert early._bar.total is None and "until eval >= 100" in early._bar.desc
    assert budget._bar.total == 1000
    early.close()
    budget.close()


SMOKE_DQN = ["--smoke", "--total-frames", "512", "--eval-every", "256",
             "--checkpoint-every", "100000"]  # fmt: skip


def test_a_run_keeps_final_and_best_and_a_second_run_there_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import dqn

    out = tmp_path / "run"
    summary = dqn.main([*SMOKE_DQN, "--output-dir", str(out)])
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1].startswith("stopped: budget done: 512 of 512 frames")
    assert json.loads(printed[-2]) == json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "budget_done"
    final, best = summary["final_checkpoint"], summary["best_checkpoint"]
    assert final["path"] == str(out / "checkpoint.pt") and final["frames"] == 512
    assert best["path"] == str(out / "best.pt") and best["frames"] in (256, 512)
    assert common.read_checkpoint(out / "best.pt")["frames"] == best["frames"]

    before = (out / "checkpoint.pt").read_bytes()
    with pytest.raises(common.RunFolderError, match=r"--resume .* --overwrite"):
        dqn.main([*SMOKE_DQN, "--output-dir", str(out)])
    assert (out / "checkpoint.pt").read_bytes() == before


def test_ctrl_c_saves_a_final_checkpoint_and_exits_130(tmp_path: Path) -> None:
    # a budget far beyond what runs before the signal; SIGINT once the loop has started
    argv = [sys.executable, str(ROOT / "recipes" / "dqn.py"), "--smoke",
            "--total-frames", "100000000", "--checkpoint-every", "100000000"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("run folder runs/dqn/smoke-"), first
        # SIGINT once the loop runs: its first logged row is in metrics.csv (a fixed sleep
        # raced with a loaded machine, where the loop had not started yet)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not any(
            len(path.read_text().splitlines()) > 1
            for path in (tmp_path / "runs" / "dqn").glob("*/metrics.csv")
        ):
            assert proc.poll() is None, "the run ended before it was interrupted"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 130, rest[-2000:]
    assert rest.strip().splitlines()[-1].startswith("stopped: interrupted (Ctrl-C) at ")
    (folder,) = (tmp_path / "runs" / "dqn").iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted"
    saved = common.read_checkpoint(folder / "checkpoint.pt")
    assert saved["frames"] == summary["frames"] == summary["final_checkpoint"]["frames"]
    assert not (tmp_path / "runs" / "dqn" / "latest").exists()  # a smoke run
