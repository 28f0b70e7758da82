"""Fault suite of the recipes: hostile flags, broken checkpoints, resumes, bad offline data.

Each case states the rule it holds: a bad flag fails at parsing (before any env, network or
training) naming the flag; a checkpoint is sealed with its SHA-256 and refused when a byte
changed, when it is truncated, or when learned state is NaN/inf; writes are atomic and a
full disk says so; a resume refuses changed hyperparameters naming the flags and leaves no
duplicate rows in metrics.csv; offline data is checked at load, naming the field.
"""

from __future__ import annotations

import csv
import dataclasses
import errno
import importlib
import math
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import ClassVar

import _common as common
import numpy as np
import pytest
import torch
from _offline import check_offline_arrays
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted(p.stem for p in (ROOT / "recipes").glob("*.py") if not p.stem.startswith("_"))

# one hostile flag per recipe, run as a script: it must exit non-zero naming the flag
BAD_FLAG = {
    "a2c": ("--checkpoint-every", "0"),
    "bc": ("--batch-size", "0"),
    "cql": ("--tau", "0"),
    "crossq": ("--lr", "-1"),
    "ddpg": ("--checkpoint-every", "-5"),
    "dqn": ("--gamma", "-1"),
    "dreamer": ("--lmbda", "2"),
    "dt": ("--dropout", "1.5"),
    "gail": ("--gp-lambda", "nan"),
    "grpo": ("--group-size", "0"),
    "impala": ("--checkpoint-every", "0"),
    "iql": ("--expectile", "1"),
    "make_dataset": ("--dataset-frames", "0"),
    "mappo": ("--minibatch-size", "0"),
    "multiseed": ("--seeds", "0"),
    "ppo": ("--gamma", "1.5"),
    "ppo_lstm": ("--num-minibatches", "0"),
    "qmix": ("--eps-init", "1.5"),
    "redq": ("--num-qvalue-nets", "0"),
    "sac": ("--batch-size", "-4"),
    "td3": ("--checkpoint-every", "0"),
    "td3_bc": ("--alpha", "-1"),
}


def test_every_recipe_has_a_bad_flag_case() -> None:
    assert sorted(BAD_FLAG) == RECIPES


@pytest.mark.parametrize("name", RECIPES)
def test_a_bad_flag_stops_every_recipe_at_parsing_naming_the_flag(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # before: e.g. --checkpoint-every 0 looped forever at the first checkpoint (a hang)
    flag, value = BAD_FLAG[name]
    recipe = importlib.import_module(name)
    out = [] if name == "multiseed" else ["--output-dir", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        recipe.main([flag, value, *out])
    assert exit_info.value.code == 2
    assert f"argument {flag}: expected" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was written: no work started


@pytest.mark.parametrize("name", ["dqn", "ppo", "make_dataset"])
def test_a_bad_flag_stops_the_script_run_as_a_subprocess(name: str, tmp_path: Path) -> None:
    # the scripts as a user runs them (a few: each pays the imports of the whole stack);
    # a timeout here means the script got past parsing
    flag, value = {"dqn": ("--checkpoint-every", "0"), "ppo": ("--gamma", "1.5"),
                   "make_dataset": ("--dataset-frames", "0")}[name]  # fmt: skip
    run = subprocess.run(
        [sys.executable, str(ROOT / "recipes" / f"{name}.py"), flag, value,
         "--output-dir", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr[-2000:]
    assert f"argument {flag}: expected" in run.stderr, run.stderr[-2000:]
    assert not (tmp_path / "out").exists()


MATRIX = [
    ("--gamma", "-0.5"),
    ("--gamma", "1.5"),
    ("--gamma", "nan"),
    ("--lr", "0"),
    ("--lr", "-0.001"),
    ("--lr", "nan"),
    ("--lr", "inf"),
    ("--batch-size", "0"),
    ("--batch-size", "-4"),
    ("--batch-size", "1.5"),
    ("--checkpoint-every", "0"),
    ("--checkpoint-every", "-5"),
    ("--frames-per-batch", "0"),
    ("--total-frames", "0"),
    ("--eval-episodes", "0"),
    ("--eval-every", "0"),
    ("--seed", "-1"),
    ("--torch-threads", "0"),
    ("--max-grad-norm", "-1"),
]
PPO_MATRIX = [
    ("--gae-lambda", "-1"),
    ("--gae-lambda", "2"),
    ("--gae-lambda", "nan"),
    ("--minibatch-size", "0"),
    ("--epochs", "0"),
    ("--num-envs", "0"),
    ("--clip-epsilon", "0"),
    ("--entropy-coeff", "-0.1"),
    ("--obs-clip", "0"),
]


def _parse_fails(recipe: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    module = importlib.import_module(recipe)
    with pytest.raises(SystemExit) as exit_info:
        common.parse_config(module.Config, argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("recipe", "flag", "value"),
    [("dqn", f, v) for f, v in MATRIX]
    + [("ppo", f, v) for f, v in MATRIX if f != "--batch-size"]
    + [("ppo", f, v) for f, v in PPO_MATRIX],
)
def test_hostile_flag_matrix(
    recipe: str, flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _parse_fails(recipe, [flag, value], capsys)
    assert f"argument {flag}: expected" in err and repr(value) in err


def test_numeric_fields_of_every_recipe_have_a_check() -> None:
    for name in RECIPES:
        config = importlib.import_module(name).Config
        own = getattr(config, "CHECKS", {})
        for field in dataclasses.fields(config):
            if type(field.default) in (int, float):
                assert field.name in common.FIELD_CHECKS or field.name in own, (
                    f"recipes/{name}.py: numeric field {field.name!r} has no range check; add "
                    "it to _common.FIELD_CHECKS (or the recipe's Config.CHECKS)"
                )


def test_a_preset_or_smoke_value_out_of_range_names_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    @dataclasses.dataclass
    class Toy(common.RunConfig):
        """Toy."""

        gamma: float = 0.99
        """Discount."""
        PRESETS: ClassVar[dict[str, dict[str, object]]] = {"bad": {"gamma": 1.5}}

    with pytest.raises(SystemExit):
        common.parse_config(Toy, ["--preset", "bad"])
    assert "--gamma 1.5: expected a number in [0, 1]" in capsys.readouterr().err


def test_a_config_built_directly_is_checked_too() -> None:
    dqn = importlib.import_module("dqn")
    with pytest.raises(ValueError, match="--checkpoint-every 0: expected an integer > 0"):
        dqn.Config(checkpoint_every=0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dataset-frames", "0"], "argument --dataset-frames: expected an integer > 0"),
        (["--collect-envs", "0"], "argument --collect-envs: expected an integer > 0"),
        (["--medium-frames", "0"], "argument --medium-frames: expected an integer > 0"),
        (["--expert-frames", "500", "--medium-frames", "1000"],
         "--expert-frames 500 must be greater than --medium-frames 1000"),
        (["--expert-frames", "1000", "--medium-frames", "1000"],
         "--expert-frames 1000 must be greater than --medium-frames 1000"),
    ],
)  # fmt: skip
def test_make_dataset_checks_its_budgets_before_training(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # before: 0 failed after ~70 s of SAC training; expert < medium wrote a worse "expert"
    assert message in _parse_fails("make_dataset", argv, capsys)


# -- checkpoints -----------------------------------------------------------------------


def _trained_state() -> dict[str, object]:
    net = nn.Linear(3, 2)
    optim = torch.optim.Adam(net.parameters(), lr=1e-3)
    net(torch.randn(4, 3)).sum().backward()
    optim.step()
    return {"loss": net.state_dict(), "optim": optim.state_dict(), "frames": 7,
            "eval_return": math.nan, "config": {"lr": 1e-3}}  # fmt: skip


def test_a_checkpoint_is_sealed_and_still_a_torch_archive(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.pt"
    common.save_checkpoint(path, _trained_state())
    assert torch.load(path, weights_only=False)["frames"] == 7  # plain torch.load reads it
    assert b"rl-recipes-checkpoint sha256=" in path.read_bytes()[-100:]
    assert common.read_checkpoint(path)["frames"] == 7
    assert not (tmp_path / "checkpoint.pt.tmp").exists()


@pytest.mark.parametrize("where", [0.3, 0.6, 0.95])
def test_a_flipped_byte_is_refused_naming_the_file(tmp_path: Path, where: float) -> None:
    # before: a flipped byte in the tensor data silently changed the (target) weights
    path = tmp_path / "checkpoint.pt"
    common.save_checkpoint(path, _trained_state())
    data = bytearray(path.read_bytes())
    i = int(len(data) * where)
    data[i] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(common.CheckpointError, match=f"checkpoint {path}"):
        common.read_checkpoint(path)


@pytest.mark.parametrize("keep", [0, 10, 0.5])
def test_a_truncated_checkpoint_is_refused(tmp_path: Path, keep: float) -> None:
    path = tmp_path / "checkpoint.pt"
    common.save_checkpoint(path, _trained_state())
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep) if isinstance(keep, float) else keep])
    with pytest.raises(common.CheckpointError, match="truncated or not a recipe checkpoint"):
        common.read_checkpoint(path)


def test_nan_in_adam_state_is_refused_naming_the_tensor(tmp_path: Path) -> None:
    # before: resumed, logged NaN losses and exited 0. A checkpoint written before seals
    # (plain torch.save) still loads, with a warning, and gets the same finiteness check.
    state = _trained_state()
    state["optim"]["state"][0]["exp_avg_sq"][0, 1] = math.nan
    path = tmp_path / "old.pt"
    torch.save({**state, "rng": common.rng_state()}, path)
    with (
        pytest.warns(UserWarning, match="has no SHA-256 seal"),
        pytest.raises(
            common.CheckpointError, match=r"optim\.state\.0\.exp_avg_sq holds 1 non-finite"
        ),
    ):
        common.read_checkpoint(path)


def test_saving_nan_parameters_is_refused_and_keeps_the_previous_checkpoint(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoint.pt"
    common.save_checkpoint(path, _trained_state())
    before = path.read_bytes()
    state = _trained_state()
    state["loss"]["weight"][0, 0] = math.inf
    with pytest.raises(common.CheckpointError, match=r"refusing to write .* loss\.weight"):
        common.save_checkpoint(path, state)
    assert path.read_bytes() == before


def test_a_full_disk_is_named_and_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "checkpoint.pt"
    common.save_checkpoint(path, _trained_state())
    before = path.read_bytes()

    def full_disk(obj: object, f: object) -> None:
        f.write(b"PK partial bytes")  # type: ignore[attr-defined]
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(common.torch, "save", full_disk)
    with pytest.raises(OSError, match=f"no space left on {tmp_path}") as info:
        common.save_checkpoint(path, _trained_state())
    assert info.value.errno == errno.ENOSPC
    assert not (tmp_path / "checkpoint.pt.tmp").exists()
    assert path.read_bytes() == before


def test_an_interrupted_write_leaves_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "checkpoint.pt"
    common.save_checkpoint(path, _trained_state())
    before = path.read_bytes()

    def interrupted(obj: object, f: object) -> None:
        f.write(b"half")  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    monkeypatch.setattr(common.torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        common.save_checkpoint(path, _trained_state())
    assert not (tmp_path / "checkpoint.pt.tmp").exists()
    assert path.read_bytes() == before


def test_resume_from_a_missing_file_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"--resume .*missing\.pt: no such checkpoint"):
        common.load_checkpoint(tmp_path / "missing.pt")


def test_a_file_that_is_not_a_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.pt"
    path.write_text("hello")
    with pytest.raises(common.CheckpointError, match="truncated or not a recipe checkpoint"):
        common.read_checkpoint(path)


# -- resume --------------------------------------------------------------------------


def _rows(csv_path: Path) -> list[tuple[str, str]]:
    with csv_path.open() as f:
        return [(r["frames"], r["name"]) for r in csv.DictReader(f)]


def test_resume_refuses_changed_hyperparameters_and_writes_no_duplicate_rows(
    tmp_path: Path,
) -> None:
    dqn = importlib.import_module("dqn")
    out = tmp_path / "run"
    args = ["--smoke", "--checkpoint-every", "1024", "--output-dir", str(out)]
    dqn.main([*args, "--total-frames", "1024"])
    mid = tmp_path / "mid.pt"
    shutil.copyfile(out / "checkpoint.pt", mid)

    # before: trained at the checkpoint's rate but recorded --lr 0.5 in the saved config
    with pytest.raises(common.CheckpointError, match=r"--lr 0\.5 \(checkpoint: 0\.0023\)"):
        dqn.main([*args, "--total-frames", "2048", "--lr", "0.5", "--resume", str(mid)])

    dqn.main([*args, "--total-frames", "2048", "--resume", str(mid)])
    # resumed again from the middle into the same folder: rows after 1024 are logged again
    dqn.main([*args, "--total-frames", "2048", "--resume", str(mid)])
    counts = Counter(_rows(out / "metrics.csv"))
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1]
    assert max(int(f) for f, _ in counts) == 2048

    saved = common.read_checkpoint(out / "checkpoint.pt")["config"]
    assert (saved["total_frames"], saved["lr"]) == (2048, 2.3e-3)  # what actually ran


def test_check_resume_config_lists_every_changed_flag(tmp_path: Path) -> None:
    cfg = common.RunConfig(seed=3, eval_every=10)
    saved = dataclasses.asdict(common.RunConfig(seed=1, eval_every=99))
    with pytest.raises(common.CheckpointError) as info:
        common.check_resume_config(cfg, saved, tmp_path / "ck.pt")
    assert "--seed 3 (checkpoint: 1)" in str(info.value)
    assert "eval-every" not in str(info.value).split("may change")[0]  # eval_every may change


def test_metrics_truncation_refuses_a_foreign_csv(tmp_path: Path) -> None:
    (tmp_path / "metrics.csv").write_text("step;loss\n1;2\n")
    with pytest.raises(ValueError, match=r"expected a metrics\.csv with the header"):
        common.RunLogger(tmp_path, total_frames=10, start_frames=5)


# -- offline data --------------------------------------------------------------------


def _arrays(n: int = 6) -> dict[str, np.ndarray]:
    return {
        "observations": np.zeros((n, 3), np.float32),
        "actions": np.zeros((n, 1), np.float32),
        "rewards": np.ones(n, np.float32),
        "next_observations": np.zeros((n, 3), np.float32),
        "terminals": np.zeros(n, bool),
        "timeouts": np.eye(1, n, n - 1, dtype=bool)[0],
    }


@pytest.mark.parametrize(
    ("field", "poison", "message"),
    [
        ("rewards", lambda a: a.__setitem__(2, np.nan), r"'rewards' holds NaN or inf in 1 .* index 2"),
        ("observations", lambda a: a.__setitem__((4, 1), np.inf), r"'observations' holds NaN or inf"),
        ("actions", lambda a: a.__setitem__((0, 0), -np.inf), r"'actions' holds NaN or inf"),
        ("next_observations", lambda a: a.__setitem__((1, 2), np.nan), r"'next_observations'"),
    ],
)  # fmt: skip
def test_offline_data_with_non_finite_values_is_refused(field, poison, message) -> None:
    arrays = _arrays()
    poison(arrays[field])
    with pytest.raises(ValueError, match=message):
        check_offline_arrays(arrays, "dataset toy")


def test_offline_terminals_must_be_0_or_1() -> None:
    arrays = _arrays()
    arrays["terminals"] = np.array([0, 0, 0.5, 0, 0, 1.0])
    with pytest.raises(
        ValueError, match=r"'terminals' must hold only 0/1 flags, got \[0\.5\] at transition 2"
    ):
        check_offline_arrays(arrays, "dataset toy")
    arrays["terminals"] = np.array([0, 0, 1, 0, 0, 1])  # integers 0/1 are fine
    check_offline_arrays(arrays, "dataset toy")


def test_offline_rewards_must_be_one_per_transition() -> None:
    # before: rewards [N, 2] loaded and failed later, inside the loss
    arrays = _arrays()
    arrays["rewards"] = np.ones((6, 2), np.float32)
    with pytest.raises(
        ValueError, match=r"'rewards' has shape \(6, 2\), expected \(6,\) or \(6, 1\)"
    ):
        check_offline_arrays(arrays, "dataset toy")
    arrays["rewards"] = np.ones((5,), np.float32)
    with pytest.raises(ValueError, match=r"'rewards' has shape \(5,\), expected 6 entries"):
        check_offline_arrays(arrays, "dataset toy")


def test_iql_refuses_a_dataset_with_nan_rewards_before_training(tmp_path: Path) -> None:
    # before: IQL trained on NaN and exited 0
    import h5py

    iql = importlib.import_module("iql")
    arrays = _arrays(50)
    arrays["rewards"][10] = np.nan
    path = tmp_path / "pendulum-bad-v0.hdf5"
    with h5py.File(path, "w") as f:
        for name, value in arrays.items():
            f[name] = value
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=rf"dataset {path}: field 'rewards' holds NaN"):
        iql.main(["--env", "Pendulum-v1", "--dataset", str(path), "--output-dir", str(out),
                  "--num-steps", "10", "--batch-size", "4"])  # fmt: skip
    assert not (out / "metrics.csv").exists()
