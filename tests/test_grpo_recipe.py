"""recipes/grpo.py: a run resumed from its halfway checkpoint ends bit-identical to a straight one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")
ROOT = Path(__file__).resolve().parents[1]


def _recipe():
    if "grpo" in sys.modules:
        return sys.modules["grpo"]
    spec = importlib.util.spec_from_file_location("grpo", ROOT / "recipes" / "grpo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["grpo"] = module  # dataclasses resolve field types through sys.modules
    spec.loader.exec_module(module)
    return module


def test_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path: Path) -> None:
    recipe = _recipe()
    args = ["--smoke", "--torch-threads", "1", "--checkpoint-every", "32", "--eval-every", "32"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    summary = recipe.main([*args, "--output-dir", str(straight)])
    recipe.main([*args, "--total-frames", "32", "--output-dir", str(split)])
    assert torch.load(split / "checkpoint.pt", weights_only=False)["frames"] == 32
    resumed = recipe.main(
        [*args, "--output-dir", str(split), "--resume", str(split / "checkpoint.pt")]
    )
    assert summary["frames"] == resumed["frames"] == 64
    assert summary["final_eval_return"] == resumed["final_eval_return"]
    a = torch.load(straight / "checkpoint.pt", weights_only=False)
    b = torch.load(split / "checkpoint.pt", weights_only=False)
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), f"{key} differs after resuming"
    for name in ("optim", "sft_optim"):
        for idx, state in a[name]["state"].items():
            for k, v in state.items():
                assert torch.equal(v, b[name]["state"][idx][k]), f"{name} {idx} {k} differs"
