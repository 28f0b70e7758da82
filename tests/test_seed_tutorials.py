"""TorchRL's tutorials (``../shared/seeds/*.txt``) run here with only their imports changed.

Each seed is a tutorial page saved as text: code, prose and printed outputs interleaved
(two of them lost their indentation, one glues prose onto a code line's end). The code
of each section is located below by line ranges of the seed file (its name carries its
content hash, so the ranges are stable); indentation the page lost is restored from the
table; nothing else in the code changes except the training budgets (``_cut_budgets``).
``seed_tutorial_driver.py`` then maps ``torchrl.*`` imports onto our packages (DESIGN.md's
table) and runs the sections of one tutorial in order, in one subprocess.

Every section TorchRL 0.14.1 runs on this machine must run here. ``SKIPPED`` lists those
that cannot run anywhere without what we do not have (GPU, torchrl itself) or that are
fragments the page never completes (names it never defines). ``KNOWN_GAPS`` lists the
sections that fail today because of another package, with the reason (xfail, strict).
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SEEDS = Path(__file__).resolve().parents[1].parent / "shared" / "seeds"
DRIVER = Path(__file__).with_name("seed_tutorial_driver.py")
TUTORIAL_TIMEOUT_S = 420


@dataclass(frozen=True)
class Section:
    """Code of one tutorial section: ``lines`` ("14-30,33"), ``indent`` ("197:1,292-294:1")."""

    seed: str
    name: str
    lines: str
    indent: str = ""


SECTIONS: list[Section] = [
    # 000: "Introduction to TorchRL" (sphinx-gallery page; indentation lost)
    Section("000", "quick-start", "14-30"),
    Section("000", "tensordict", "43-52"),
    Section("000", "tensordict-ops", "62-70"),
    Section("000", "tensordict-nested", "89-98"),
    Section("000", "transforms", "173-180"),
    Section("000", "parallel-env", "195-205", "197:1"),
    Section("000", "tensordict-module", "217-224"),
    Section("000", "networks", "235-241"),
    Section("000", "probabilistic-policy", "249-272"),
    Section("000", "collector", "282-295", "292-294:1"),
    Section("000", "replay-buffer", "305-313"),
    Section("000", "prioritized-replay", "318-327"),
    Section("000", "dqn-loss", "334-343,345-358"),
    Section("000", "dqn-training", "363-402", "387-390:1,391:2,392-399:1,400:2"),
    # 001: TorchRL's README (indentation lost; prose glued onto the last code lines)
    Section("001", "rollout", "27-46"),
    Section("001", "tensordict-ops", "49-57"),
    Section("001", "gym-cuda-transforms", "64-73"),
    Section("001", "collector", "75-84", "83-84:1"),
    Section("001", "replay-buffer", "86-95"),
    Section("001", "actor", "98-119"),
    Section("001", "ppo-loss", "122-128"),
    # 002: PPO on InvertedDoublePendulum-v4 (getting-started guide)
    Section("002", "version", "18-19"),
    Section("002", "env", "26-57"),
    Section("002", "actor-critic", "65-127"),
    Section("002", "collector", "134-146"),
    Section("002", "loss", "154-197"),
    Section("002", "training", "208-258"),
    # 003: "Introduction to TorchRL", the ICML 2022 demo
    Section("003", "tensordict-create", "17-18,20-28"),
    Section("003", "tensordict-index", "37-38"),
    Section("003", "tensordict-stack", "48-63"),
    Section("003", "tensordict-ops", "75-92"),
    Section("003", "tensordict-nested", "111-121"),
    Section("003", "rb-list", "135-138,140-141,143-146"),
    Section("003", "rb-tensordict", "148-151,153-156"),
    Section("003", "rb-prioritized", "170-175,184,186-191"),
    Section("003", "gym-import", "192-195"),
    Section("003", "envs", "200-205"),
    Section("003", "env-pixels", "227-228,239-240"),
    Section("003", "env-transformed", "241-250"),
    Section("003", "transforms", "258-268,275,286-287"),
    Section("003", "parallel-env", "300-310,322-324"),
    Section("003", "mlp", "336-341"),
    Section("003", "cnn", "351-358"),
    Section("003", "tensordict-module", "368-373"),
    Section("003", "sequence", "382-392,420"),
    Section("003", "sequence-call", "422-428,438-443"),
    Section("003", "functional", "454-456,523-524"),
    Section("003", "safe-module", "536-545,547-548"),
    Section("003", "actor", "550-554"),
    Section("003", "probabilistic", "555-576,586-598"),
    Section("003", "exploration-type", "609-621"),
    Section("003", "env-and-modules", "632-652"),
    Section("003", "env-and-modules-list", "674-688,710"),
    Section("003", "rollout", "712-717"),
    Section("003", "collectors-setup", "719-721,723-729"),
    Section("003", "multi-sync", "731-746"),
    Section("003", "multi-async", "774-791"),
    Section("003", "ddpg-loss", "820-848,861"),
    # 004: "TensorDict" concepts page
    Section("004", "tensordict", "14-28"),
    Section("004", "tensordict-ops", "34-44"),
    Section("004", "nested-keys", "50-58"),
    Section("004", "rollout", "92-116"),
    Section("004", "batch-ops", "122-135"),
    Section("004", "critic", "141-153"),
]

_UNDEFINED = "a fragment: uses names the page never defines ({}); fails in TorchRL too"
# Sections that cannot run on this machine with TorchRL 0.14.1 either.
SKIPPED: dict[str, str] = {
    "001/tensordict-ops": _UNDEFINED.format("list_of_tensordicts") + "; and needs CUDA",
    "001/gym-cuda-transforms": "needs a CUDA device (GymEnv(..., device='cuda:0'))",
    "001/collector": _UNDEFINED.format("train_step") + "; its env is the CUDA one",
    "001/replay-buffer": _UNDEFINED.format("collector_batch"),
    "001/ppo-loss": _UNDEFINED.format("critic, data"),
    "002/version": "imports torchrl itself to print its version",
    "004/tensordict-ops": _UNDEFINED.format("list_of_tensordicts") + "; and needs CUDA",
    "004/nested-keys": _UNDEFINED.format("batch"),
    "004/batch-ops": _UNDEFINED.format("list_of_tensordicts") + "; and needs CUDA",
}

# Sections that fail today because of a gap in another package (xfail, strict).
KNOWN_GAPS: dict[str, str] = {}

# Training budgets: (pattern, cap). Caps keep frames_per_batch | total_frames.
_BUDGETS = [
    (r"\b(total_frames\s*=\s*)([\d_]+)", 300),
    (r"\b(frames_per_batch\s*=\s*)([\d_]+)", 100),
    (r"\b(num_epochs\s*=\s*)([\d_]+)", 1),
    (r"\b(num_iter\s*=\s*)([\d_]+)", 100),
    (r"(\.rollout\()([\d_]+)", 50),
]


def _cut_budgets(code: str) -> str:
    for pattern, cap in _BUDGETS:
        code = re.sub(pattern, lambda m, cap=cap: f"{m.group(1)}{min(int(m.group(2)), cap)}", code)
    return code


def _numbers(spec: str) -> list[int]:
    out: list[int] = []
    for part in filter(None, spec.split(",")):
        first, _, last = part.partition("-")
        out += range(int(first), int(last or first) + 1)
    return out


_GLUED_PROSE = re.compile(r"^(.*[\)\]])([A-Z][a-z]+ .*)$")


def section_code(section: Section, text_lines: list[str]) -> str:
    """The code of ``section``: its lines, the page's lost indentation restored."""
    levels: dict[int, int] = {}
    for part in filter(None, section.indent.split(",")):
        span, _, level = part.partition(":")
        levels.update(dict.fromkeys(_numbers(span), int(level)))
    lines = []
    for number in _numbers(section.lines):
        line = text_lines[number - 1]
        glued = _GLUED_PROSE.match(line)
        if glued and not line.lstrip().startswith("#"):
            line = glued.group(1)  # the page ran the next paragraph onto this line
        lines.append("    " * levels.get(number, 0) + line)
    return _cut_budgets("\n".join(lines) + "\n")


def _seed_file(seed: str) -> Path:
    (path,) = SEEDS.glob(f"{seed}_*.txt")
    return path


def _sections_of(seed: str) -> list[tuple[str, str]]:
    text_lines = _seed_file(seed).read_text().splitlines()
    return [
        (s.name, section_code(s, text_lines))
        for s in SECTIONS
        if s.seed == seed and f"{s.seed}/{s.name}" not in SKIPPED
    ]


@functools.cache
def run_tutorials(tmp_dir: str) -> dict[str, dict[str, dict[str, str]]]:
    """Run every tutorial's non-skipped sections, one subprocess per tutorial, all at once."""
    seeds = sorted({s.seed for s in SECTIONS})
    env = {**os.environ, "MUJOCO_GL": "egl", "OMP_NUM_THREADS": "1"}
    if env.get("LAZY_LEGACY_OP") == "None":  # left by tensordict 0.14's set_lazy_legacy: unset
        del env["LAZY_LEGACY_OP"]
    procs = {}
    for seed in seeds:
        sections_path = Path(tmp_dir) / f"sections_{seed}.json"
        sections_path.write_text(json.dumps(_sections_of(seed)))
        results_path = Path(tmp_dir) / f"results_{seed}.json"
        log = open(Path(tmp_dir) / f"log_{seed}.txt", "w")  # noqa: SIM115 (closed below)
        cmd = [sys.executable, str(DRIVER), str(sections_path), str(results_path)]
        procs[seed] = (subprocess.Popen(cmd, cwd=tmp_dir, stdout=log, stderr=log, env=env), log)
    results = {}
    for seed, (proc, log) in procs.items():
        try:
            proc.wait(timeout=TUTORIAL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        path = Path(tmp_dir) / f"results_{seed}.json"
        results[seed] = json.loads(path.read_text()) if path.exists() else {}
        if proc.returncode != 0:
            tail = (Path(tmp_dir) / f"log_{seed}.txt").read_text()[-3000:]
            for name, _ in _sections_of(seed):
                results[seed].setdefault(
                    name, {"status": "error", "error": f"driver exited {proc.returncode}:\n{tail}"}
                )
    return results


def _params() -> list[object]:
    params = []
    for s in SECTIONS:
        key = f"{s.seed}/{s.name}"
        marks = []
        if key in SKIPPED:
            marks.append(pytest.mark.skip(reason=SKIPPED[key]))
        elif key in KNOWN_GAPS:
            marks.append(pytest.mark.xfail(reason=KNOWN_GAPS[key], strict=True))
        params.append(pytest.param(s, id=key, marks=marks))
    return params


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("seed_tutorials"))


@pytest.mark.skipif(not SEEDS.is_dir(), reason=f"no seed tutorials at {SEEDS} (../shared/seeds)")
@pytest.mark.parametrize("section", _params())
def test_seed_section_runs(section: Section, workdir: str) -> None:
    result = run_tutorials(workdir)[section.seed][section.name]
    assert result["status"] == "ok", f"{section.seed}/{section.name} failed:\n{result['error']}"


@pytest.mark.skipif(not SEEDS.is_dir(), reason=f"no seed tutorials at {SEEDS} (../shared/seeds)")
def test_section_code_compiles() -> None:
    """The extraction itself: every section (skipped ones too) is valid Python."""
    for s in SECTIONS:
        code = section_code(s, _seed_file(s.seed).read_text().splitlines())
        compile(code, f"{s.seed}/{s.name}", "exec")
