"""Offline datasets: D4RL HDF5 and Minari round trips, TED transitions checked against a plain loop."""

from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rl_buffers import (
    D4RLExperienceReplay,
    DatasetFormatError,
    MinariExperienceReplay,
    RoundRobinWriter,
    SliceSampler,
)
from rl_buffers.datasets import (
    check_matches_env,
    read_d4rl_hdf5,
    transitions_from_arrays,
    write_d4rl_hdf5,
    write_minari_dataset,
)

pytest.importorskip("h5py")


def _steps(n: int = 12, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    terminals = np.zeros(n, bool)
    timeouts = np.zeros(n, bool)
    terminals[[3, 9]] = True
    timeouts[[6, n - 1]] = True
    return {
        "observations": rng.normal(size=(n, 3)).astype(np.float32),
        "actions": rng.uniform(-1, 1, size=(n, 2)).astype(np.float32),
        "rewards": rng.normal(size=n).astype(np.float32),
        "terminals": terminals,
        "timeouts": timeouts,
    }


def _reference(fields):
    """The transitions a plain loop reads off the arrays (D4RL's convention, TED keys)."""
    obs, rows, episode = fields["observations"], [], 0
    for t in range(len(obs)):
        term, tout = bool(fields["terminals"][t]), bool(fields["timeouts"][t])
        if (tout and not term) or (t == len(obs) - 1 and not term):
            episode += 1
            continue  # next observation unknown: dropped
        nxt = np.zeros_like(obs[t]) if term else obs[t + 1]
        rows.append((obs[t], fields["actions"][t], fields["rewards"][t], nxt, term, episode))
        episode += term
    return rows


def test_transitions_match_a_plain_loop():
    fields = _steps()
    data = transitions_from_arrays(fields)
    rows = _reference(fields)
    assert data.shape == (len(rows),)
    for i, (o, a, r, nxt, term, ep) in enumerate(rows):
        assert torch.equal(data["observation"][i], torch.as_tensor(o))
        assert torch.equal(data["action"][i], torch.as_tensor(a))
        assert data["next", "reward"][i, 0] == torch.tensor(r)
        assert torch.equal(data["next", "observation"][i], torch.as_tensor(nxt))
        assert bool(data["next", "terminated"][i, 0]) == term == bool(data["next", "done"][i, 0])
        assert int(data["episode"][i]) == ep
    assert not data["done"].any() and not data["next", "truncated"].any()


def test_given_next_observations_keep_every_step_and_truncation_flags():
    fields = _steps()
    fields["next_observations"] = fields["observations"] + 1
    data = transitions_from_arrays(fields, use_truncated_as_done=False)
    assert data.shape == (12,)
    assert torch.equal(data["next", "observation"], torch.as_tensor(fields["observations"] + 1))
    assert data["next", "truncated"][:, 0].nonzero().squeeze(-1).tolist() == [6, 11]
    assert not data["next", "done"][6, 0]  # done = terminated only


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda f: f.pop("rewards"), "no field 'rewards'"),
        (
            lambda f: f.update(actions=f["actions"][:-1]),
            "'actions' has 11 entries but 'observations' has 12",
        ),
        (
            lambda f: f.update(next_observations=np.zeros((12, 4))),
            "'next_observations' has per-step shape",
        ),
        (lambda f: f.update(terminals=np.zeros((12, 2))), "one flag per step"),
    ],
)
def test_bad_datasets_name_the_field(change, match):
    fields = _steps()
    change(fields)
    with pytest.raises(DatasetFormatError, match=match):
        transitions_from_arrays(fields)


def test_d4rl_hdf5_round_trip_and_replay_buffer(tmp_path):
    fields = _steps()
    write_d4rl_hdf5(tmp_path / "toy-medium-v2.hdf5", fields)
    back = read_d4rl_hdf5(tmp_path / "toy-medium-v2.hdf5")
    for name, value in fields.items():
        np.testing.assert_array_equal(back[name], value)
    rb = D4RLExperienceReplay("toy-medium-v2", batch_size=4, root=tmp_path)
    expected = transitions_from_arrays(fields)
    assert len(rb) == expected.shape[0]
    assert (rb[:].exclude("index") == expected).all()
    sample = rb.sample()
    assert sample.shape == (4,) and ("next", "observation") in sample.keys(True)
    with pytest.raises(RuntimeError, match="cannot be written"):
        rb.extend(expected[:2])


def test_missing_d4rl_file_says_where_and_how(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"make_dataset\.py"):
        D4RLExperienceReplay("halfcheetah-medium-v2", root=tmp_path)
    (tmp_path / "junk-v0.hdf5").write_text("not hdf5")
    with pytest.raises(DatasetFormatError, match="not a readable HDF5"):
        D4RLExperienceReplay("junk-v0", root=tmp_path)


def test_a_dataset_buffer_can_be_made_writable_for_fine_tuning(tmp_path):
    write_d4rl_hdf5(tmp_path / "toy-v0.hdf5", _steps())
    rb = D4RLExperienceReplay("toy-v0", root=tmp_path, writer=RoundRobinWriter())
    n = len(rb)
    rb.extend(rb[:2].exclude("index"))  # a full storage: overwrites the oldest
    assert len(rb) == n


def test_slices_of_a_dataset_never_cross_episodes(tmp_path):
    write_d4rl_hdf5(tmp_path / "toy-v0.hdf5", _steps(60, seed=1))
    rb = D4RLExperienceReplay("toy-v0", root=tmp_path, sampler=SliceSampler(slice_len=2))
    batch = rb.sample(20).reshape(-1, 2)
    assert (batch["episode"][:, 0] == batch["episode"][:, 1]).all()


@pytest.mark.parametrize("relative_root", [False, True])
def test_minari_round_trip(tmp_path, monkeypatch, relative_root):
    gym = pytest.importorskip("gymnasium")
    pytest.importorskip("minari")
    if relative_root:  # Minari joined a relative root twice (runs/x/.../runs/x/...): no file
        monkeypatch.chdir(tmp_path)
        tmp_path = Path("datasets")
    rng = np.random.default_rng(0)
    episodes = []
    for steps, terminated in ((3, True), (4, False)):
        episodes.append({
            "observations": rng.normal(size=(steps + 1, 3)).astype(np.float32),
            "actions": rng.uniform(-1, 1, size=(steps, 1)).astype(np.float32),
            "rewards": rng.normal(size=steps),
            "terminations": [False] * (steps - 1) + [terminated],
            "truncations": [False] * (steps - 1) + [not terminated],
        })  # fmt: skip
    box = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    write_minari_dataset("toy/test-v0", episodes, observation_space=box,
                         action_space=gym.spaces.Box(-1, 1, (1,), np.float32), root=tmp_path)  # fmt: skip
    rb = MinariExperienceReplay("toy/test-v0", batch_size=2, root=tmp_path)
    data = rb[:]
    assert len(rb) == 7 and data["episode"].tolist() == [0, 0, 0, 1, 1, 1, 1]
    for i, ep in enumerate(episodes):
        rows = data[data["episode"] == i]
        assert torch.equal(rows["observation"], torch.as_tensor(ep["observations"][:-1]))
        assert torch.equal(rows["next", "observation"], torch.as_tensor(ep["observations"][1:]))
    assert data["next", "terminated"][:, 0].tolist() == [0, 0, 1, 0, 0, 0, 0]
    assert data["next", "truncated"][:, 0].tolist() == [0, 0, 0, 0, 0, 0, 1]
    with pytest.raises(FileNotFoundError, match="cannot be downloaded"):
        MinariExperienceReplay("mujoco/halfcheetah/medium-v0", root=tmp_path)


def test_check_matches_env_names_the_entry():
    from types import SimpleNamespace

    data = TensorDict(observation=torch.zeros(5, 17), action=torch.zeros(5, 6), batch_size=[5])
    env = SimpleNamespace(observation_spec={"observation": SimpleNamespace(shape=(11,))},
                          action_spec=SimpleNamespace(shape=(3,)), batch_size=())  # fmt: skip
    with pytest.raises(DatasetFormatError, match="'observation' has per-step shape \\(17,\\)"):
        check_matches_env(data, env)


def test_a_given_storage_holds_the_dataset(tmp_path):
    from rl_buffers import LazyMemmapStorage

    write_d4rl_hdf5(tmp_path / "toy-v0.hdf5", _steps())
    storage = LazyMemmapStorage(20, scratch_dir=tmp_path / "memmap")
    rb = D4RLExperienceReplay("toy-v0", root=tmp_path, storage=storage)
    assert rb.storage is storage and len(storage) == len(rb) > 0
