"""``--compile`` in recipes/ppo.py and recipes/sac.py: the update's loss (and PPO's policy)
go through ``torch.compile`` and the run still trains end to end.

The fast tests compile with Dynamo's ``eager`` backend (the graphs are traced, no code is
generated); the test marked ``slow`` runs Inductor, as ``--compile`` does (tens of seconds
of C++ compilation on CPU: deselect with ``-m "not slow"``).
"""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "recipes"))

ARGS = {
    "ppo": ["--smoke", "--total-frames", "256", "--frames-per-batch", "128", "--hidden", "16",
            "--minibatch-size", "128", "--eval-every", "256", "--checkpoint-every", "256"],
    "sac": ["--smoke", "--env", "Pendulum-v1", "--total-frames", "300", "--frames-per-batch",
            "100", "--init-random-frames", "200", "--utd-ratio", "0.1", "--hidden", "16",
            "--eval-every", "300", "--checkpoint-every", "300"],
}  # fmt: skip
COMPILED = {"ppo": ["ProbabilisticActor", "ClipPPOLoss"], "sac": ["SACLoss"]}


def load_recipe(name: str) -> ModuleType:
    """The recipe ``recipes/<name>.py`` as a module (tests/conftest.py puts recipes/ on sys.path)."""
    return importlib.import_module(name)


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Records what ``torch.compile`` is given; compiles it with Dynamo's eager backend."""
    real, seen = torch.compile, []

    def spy(model: Any, **kwargs: Any) -> Any:
        seen.append(model)
        return real(model, backend="eager")

    monkeypatch.setattr(torch, "compile", spy)
    torch._dynamo.reset()
    return seen


@pytest.mark.parametrize("name", ["ppo", "sac"])
def test_compile_flag_compiles_the_update_and_trains(
    name: str, compiled: list[Any], tmp_path: Path
) -> None:
    recipe = load_recipe(name)
    recipe.main([*ARGS[name], "--output-dir", str(tmp_path / "eager")])
    assert compiled == []  # without the flag nothing is compiled
    summary = recipe.main([*ARGS[name], "--compile", "--output-dir", str(tmp_path / "c")])
    # a module, or the bound call of a module compiled in place (``actor.compile()``)
    assert [type(getattr(m, "__self__", m)).__name__ for m in compiled] == COMPILED[name]
    assert summary["frames"] == int(ARGS[name][ARGS[name].index("--total-frames") + 1])
    assert math.isfinite(summary["final_eval_return"])
    ckpt = torch.load(tmp_path / "c" / "checkpoint.pt", weights_only=False)
    # the checkpoint holds the eager module's names (a compiled run resumes without --compile)
    assert not any("_orig_mod" in key for key in ckpt["loss"])
    if name == "ppo":  # and PPO's Adam step is the fused kernel
        assert ckpt["optim"]["param_groups"][0]["fused"] is True


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ppo", "sac"])
def test_compile_with_inductor_trains(name: str, tmp_path: Path) -> None:
    torch._dynamo.reset()
    summary = load_recipe(name).main([*ARGS[name], "--compile", "--output-dir", str(tmp_path)])
    assert math.isfinite(summary["final_eval_return"])
