"""The offline recipes end to end: make_dataset's two formats hold the same transitions, every
offline recipe trains from them, resumes exactly, and refuses data of another task.

One tiny make_dataset run (Pendulum, --smoke) is shared by the module.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
from tensordict import TensorDict

pytest.importorskip("h5py")
pytest.importorskip("minari")

OFFLINE = ("iql", "cql", "td3_bc", "bc")


def load_recipe(name: str) -> ModuleType:
    """The recipe ``recipes/<name>.py`` as a module (tests/conftest.py puts recipes/ on sys.path)."""
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("make_dataset")
    load_recipe("make_dataset").main(["--smoke", "--output-dir", str(root)])
    return root


def _flat(td: TensorDict) -> dict[str, torch.Tensor]:
    return {".".join(k) if isinstance(k, tuple) else k: v for k, v in
            td.items(include_nested=True, leaves_only=True)}  # fmt: skip


@pytest.mark.parametrize("level", ["random", "medium", "expert", "medium-replay", "medium-expert"])
def test_hdf5_and_minari_outputs_load_into_the_same_transitions(
    data_root: Path, level: str
) -> None:
    from rl_buffers.datasets import D4RLExperienceReplay, MinariExperienceReplay

    md = load_recipe("make_dataset")
    d4rl = D4RLExperienceReplay(f"pendulum-{level}-v0", root=data_root / "d4rl")
    minari = MinariExperienceReplay(md.minari_id("Pendulum-v1", level), root=data_root / "minari")
    a, b = _flat(d4rl.storage[: len(d4rl)]), _flat(minari.storage[: len(minari)])
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype, key
        assert torch.equal(a[key], b[key]), f"{level}: {key!r} differs between the formats"
    assert len(d4rl) > 0 and bool(a["next.done"][-1])  # the data's end closes an episode


def test_dataset_sizes_and_references(data_root: Path) -> None:
    from rl_buffers.datasets import read_d4rl_hdf5

    md = load_recipe("make_dataset")
    refs = json.loads((data_root / "d4rl" / "pendulum-references.json").read_text())
    smoke = md.Config.SMOKE
    sizes = {lvl: len(read_d4rl_hdf5(md.d4rl_path(data_root, "Pendulum-v1", lvl))["rewards"])
             for lvl in md.LEVELS}  # fmt: skip
    assert sizes["random"] == sizes["medium"] == sizes["expert"] == smoke["dataset_frames"]
    assert sizes["medium-replay"] == smoke["medium_frames"]  # the whole replay buffer
    assert sizes["medium-expert"] == sizes["medium"] + sizes["expert"]
    assert {"random_return", "expert_return", "medium_return", "datasets"} <= refs.keys()
    # Pendulum episodes are 200 steps: every complete episode's return is summed over 200 rewards
    expert = read_d4rl_hdf5(md.d4rl_path(data_root, "Pendulum-v1", "expert"))
    ends = np.flatnonzero(expert["timeouts"])
    assert np.all(np.diff(np.concatenate([[-1], ends])) <= 200)
    first = float(expert["rewards"][: ends[0] + 1].sum())
    assert md.episode_returns({**expert, "cut": np.zeros_like(expert["timeouts"])})[0] == first


def test_an_episode_cut_by_the_data_s_end_is_marked_and_left_out_of_the_returns() -> None:
    md = load_recipe("make_dataset")
    steps = TensorDict(
        {
            "observation": torch.arange(5.0)[:, None],
            "action": torch.zeros(5, 1),
            "next": {
                "observation": torch.arange(1.0, 6.0)[:, None],
                "reward": torch.ones(5, 1),
                "terminated": torch.tensor([[False], [True], [False], [False], [False]]),
                "truncated": torch.zeros(5, 1, dtype=torch.bool),
            },
        },
        batch_size=[5],
    )
    arrays = md.arrays_from_steps(steps)
    assert arrays["terminals"].tolist() == [False, True, False, False, False]
    assert arrays["timeouts"].tolist() == [False, False, False, False, True]
    assert md.episode_returns(arrays) == [2.0]  # the cut episode (3 steps) is not counted
    episodes = md.episodes_of(arrays)
    assert [len(ep["observations"]) for ep in episodes] == [3, 4]
    assert episodes[1]["observations"][:, 0].tolist() == [2.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize("name", OFFLINE)
def test_offline_recipe_trains_from_a_made_dataset(
    name: str, data_root: Path, tmp_path: Path
) -> None:
    recipe = load_recipe(name)
    dataset = data_root / "d4rl" / "pendulum-medium-v0.hdf5"
    summary = recipe.main(["--smoke", "--dataset", str(dataset), "--output-dir", str(tmp_path)])
    refs = json.loads((data_root / "d4rl" / "pendulum-references.json").read_text())
    expected = (
        100
        * (summary["final_eval_return"] - refs["random_return"])
        / (refs["expert_return"] - refs["random_return"])
    )
    assert summary["gradient_steps"] == recipe.Config.SMOKE["num_steps"]
    assert summary["final_normalized_score"] == pytest.approx(expected)
    assert "eval/normalized_score" in (tmp_path / "metrics.csv").read_text()
    assert (tmp_path / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"


def test_offline_recipe_reads_the_minari_copy(data_root: Path, tmp_path: Path) -> None:
    summary = load_recipe("iql").main([
        "--smoke", "--dataset", "local/pendulum/medium-v0",
        "--minari-root", str(data_root / "minari"), "--output-dir", str(tmp_path),
    ])  # fmt: skip
    assert summary["final_normalized_score"] == summary["final_normalized_score"]  # not nan


@pytest.mark.parametrize("name", ["cql", "td3_bc"])  # both keep a step counter beside the nets
def test_offline_resume_is_bit_identical(name: str, data_root: Path, tmp_path: Path) -> None:
    recipe = load_recipe(name)
    args = ["--smoke", "--dataset", str(data_root / "d4rl" / "pendulum-medium-replay-v0.hdf5"),
            "--num-steps", "30", "--checkpoint-every", "15", "--eval-every", "30"]  # fmt: skip
    straight, split = tmp_path / "straight", tmp_path / "split"
    recipe.main([*args, "--output-dir", str(straight)])
    recipe.main([*args, "--num-steps", "15", "--output-dir", str(split)])
    recipe.main([*args, "--output-dir", str(split), "--resume", str(split / "checkpoint.pt")])
    a = torch.load(straight / "checkpoint.pt", weights_only=False)
    b = torch.load(split / "checkpoint.pt", weights_only=False)
    assert a["frames"] == b["frames"] == 30
    assert a["counter"] == b["counter"]
    for key, value in a["loss"].items():
        assert torch.equal(value, b["loss"][key]), f"{name}: {key} differs after resuming"


def test_a_dataset_of_another_task_is_refused(data_root: Path, tmp_path: Path) -> None:
    from rl_buffers.datasets import DatasetFormatError

    dataset = data_root / "d4rl" / "pendulum-medium-v0.hdf5"
    with pytest.raises(DatasetFormatError, match="'observation' has per-step shape"):
        load_recipe("bc").main(["--smoke", "--env", "MountainCarContinuous-v0",
                                "--dataset", str(dataset), "--output-dir", str(tmp_path)])  # fmt: skip


def test_a_dataset_path_that_is_not_hdf5_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"expected a D4RL '\.hdf5' file"):
        load_recipe("bc").main(["--smoke", "--dataset", str(tmp_path / "data.npz"),
                                "--output-dir", str(tmp_path)])  # fmt: skip
