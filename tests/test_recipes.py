"""The recipes end to end: --help lists every field; checkpoints resume bit-identically.

Resumes are exact because the collector checkpoints the env's live state
(``env.get_state()``) and the step in flight, not only counters.

Every recipe's ``--smoke`` run is nox's ``recipes`` session; here, the runs that prove
exact resumes (N frames straight == N/2, checkpoint, resume, N/2 more) on a discrete and a
continuous off-policy recipe, plus the files every run leaves behind.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from types import ModuleType

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
RECIPES = sorted(p.stem for p in (ROOT / "recipes").glob("*.py") if not p.stem.startswith("_"))


def load_recipe(name: str) -> ModuleType:
    """The recipe ``recipes/<name>.py`` as a module (tests/conftest.py puts recipes/ on sys.path)."""
    return importlib.import_module(name)


@pytest.mark.parametrize("name", RECIPES)
def test_help_lists_every_field_with_its_doc(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = load_recipe(name)
    with pytest.raises(SystemExit) as exit_info:
        recipe.main(["--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for field in dataclasses.fields(recipe.Config):
        assert f"--{field.name.replace('_', '-')}" in text
    assert "--smoke [SMOKE]" in text and "tiny budget" in text
    assert set(recipe.Config.SMOKE) <= {f.name for f in dataclasses.fields(recipe.Config)}


RESUME_CASES = {
    # a learning-rate schedule spans the planned run (as for ppo below)
    "dqn": ["--smoke", "--prioritized", "--anneal-lr", "false"],
    # on-policy, with a vector env stepped mid-episode at the checkpoint; a learning-rate
    # schedule spans the planned run, so the halves below would plan different schedules
    "ppo": ["--smoke", "--anneal-lr", "false"],
    # multi-agent (VMAS): the env's exact state is every tensor of the simulation
    "mappo": ["--smoke", "--value-norm", "popart"],
    "qmix": ["--smoke"],
    "sac": [
        "--smoke",
        "--total-frames", "1000",
        "--frames-per-batch", "250",
        "--init-random-frames", "250",
        "--utd-ratio", "0.02",
        "--eval-every", "1000",
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(RESUME_CASES))
def test_resume_is_bit_identical_to_an_uninterrupted_run(name: str, tmp_path: Path) -> None:
    recipe = load_recipe(name)
    args = RESUME_CASES[name]
    total = int(args[args.index("--total-frames") + 1]) if "--total-frames" in args else None
    total = total or recipe.Config.SMOKE["total_frames"]
    half = total // 2
    every = ["--checkpoint-every", str(half)]
    straight, split = tmp_path / "straight", tmp_path / "split"
    summary = recipe.main([*args, *every, "--output-dir", str(straight)])
    recipe.main([*args, *every, "--total-frames", str(half), "--output-dir", str(split)])
    halfway = torch.load(split / "checkpoint.pt", weights_only=False)
    assert halfway["frames"] == half
    resumed = recipe.main(
        [*args, *every, "--output-dir", str(split), "--resume", str(split / "checkpoint.pt")]
    )

    assert summary["frames"] == resumed["frames"] == total
    a = torch.load(straight / "checkpoint.pt", weights_only=False)
    b = torch.load(split / "checkpoint.pt", weights_only=False)
    assert a["loss"].keys() == b["loss"].keys()
    for key, value in a["loss"].items():
        assert torch.equal(value, b["loss"][key]), f"{name}: {key} differs after resuming"
    if "buffer" in a:  # off-policy recipes checkpoint their replay buffer
        leaves_a, leaves_b = a["buffer"]["storage"]["leaves"], b["buffer"]["storage"]["leaves"]
        assert all(torch.equal(x, y) for x, y in zip(leaves_a, leaves_b, strict=True))
        assert a["buffer"]["writer"] == b["buffer"]["writer"]

    for run in (straight, split):
        assert (run / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
        assert json.loads((run / "summary.json").read_text())["frames"] == total
        header = (run / "metrics.csv").read_text().splitlines()[0]
        assert header == "frames,name,value"
    assert "eval/return" in (straight / "metrics.csv").read_text()
