"""The learning gate's verdicts (scripts/learning_gate.py); nox's ``learning`` session runs it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "learning_gate", ROOT / "scripts" / "learning_gate.py"
)
gate_mod = importlib.util.module_from_spec(_spec)
sys.modules["learning_gate"] = gate_mod  # dataclasses resolve field types through sys.modules
_spec.loader.exec_module(gate_mod)

GATE = gate_mod.Gate("toy", "toy", (), bar=475.0, within_frames=1000)


def test_check_passes_at_the_first_evaluation_at_the_bar_within_the_budget() -> None:
    ok, why = gate_mod.check(GATE, [(100, 20.0), (500, 480.0), (900, 300.0)])
    assert ok and "reached 475 at 500 frames" in why


def test_check_fails_below_the_bar_too_late_or_without_evaluations() -> None:
    ok, why = gate_mod.check(GATE, [(100, 20.0), (900, 474.9)])
    assert not ok and "never reached 475" in why and "best 474.9 at 900" in why
    ok, _ = gate_mod.check(GATE, [(100, 20.0), (1100, 500.0)])  # reached after the budget
    assert not ok
    ok, why = gate_mod.check(GATE, [])
    assert not ok and "no evaluation" in why


def test_the_gates_are_the_documented_ones() -> None:
    by_name = {g.name: g for g in gate_mod.GATES}
    assert set(by_name) == {"ppo", "dqn"}
    for gate in gate_mod.GATES:
        assert (ROOT / "recipes" / f"{gate.recipe}.py").is_file()
        assert "--seed" in gate.args and "--target-return" in gate.args
    assert by_name["ppo"].bar == 500.0 and by_name["dqn"].bar == 475.0


def _fake_recipe(tmp_path: Path, value: float, code: int = 0) -> Path:
    script = tmp_path / f"fake_{value}_{code}.py"
    script.write_text(
        "import sys, pathlib\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--output-dir') + 1]); out.mkdir(parents=True)\n"
        f"(out / 'metrics.csv').write_text('frames,name,value\\n10,loss,1\\n20,eval/return,{value}\\n')\n"
        f"print('fake run'); sys.exit({code})\n"
    )
    return script


def test_run_gates_runs_each_recipe_and_reads_its_metrics(tmp_path: Path) -> None:
    good = gate_mod.Gate("good", str(_fake_recipe(tmp_path, 500.0)), (), 475.0, 100)
    bad = gate_mod.Gate("bad", str(_fake_recipe(tmp_path, 10.0)), (), 475.0, 100)
    crash = gate_mod.Gate("crash", str(_fake_recipe(tmp_path, 500.0, code=2)), (), 475.0, 100)
    out = tmp_path / "out"
    out.mkdir()
    (ok_good, why_good), (ok_bad, _), (ok_crash, why_crash) = gate_mod.run_gates(
        [good, bad, crash], out
    )
    assert ok_good and "reached 475 at 20 frames" in why_good
    assert not ok_bad
    assert not ok_crash and "exit 2" in why_crash and "fake run" in why_crash
