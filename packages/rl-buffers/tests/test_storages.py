import subprocess
import sys
import textwrap

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    ReplayBuffer,
    StorageMemoryError,
    TensorDictMaxValueWriter,
    TensorDictReplayBuffer,
    TensorStorage,
)
from rl_buffers._memory import available_bytes

from ._data import collected, rollout, transitions


def test_memmap_reopens_after_process_restart(tmp_path):
    script = textwrap.dedent(f"""
        import torch
        from tensordict import TensorDict
        from rl_buffers import LazyMemmapStorage, TensorDictReplayBuffer
        rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(10, scratch_dir={str(tmp_path)!r}))
        rb.extend(TensorDict(x=torch.arange(13.0), batch_size=[13]))
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    with pytest.raises(FileExistsError, match="existsok=True"):
        LazyMemmapStorage(10, scratch_dir=tmp_path)
    rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(10, scratch_dir=tmp_path, existsok=True))
    assert len(rb) == 10
    assert rb.storage.get(torch.arange(10))["x"].tolist() == [10, 11, 12, 3, 4, 5, 6, 7, 8, 9]
    from tensordict import TensorDict

    rb.extend(TensorDict(x=torch.tensor([20.0]), batch_size=[1]))  # the cursor resumes at 3
    assert rb.storage.get(torch.tensor([3]))["x"].item() == 20.0


def test_unwritable_memmap_dir_raises_before_writing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(PermissionError, match="cannot create scratch_dir"):
        LazyMemmapStorage(10, scratch_dir=blocker / "sub")


def test_memory_check_raises_with_the_figure():
    free = available_bytes(torch.device("cpu"))
    if free is None:
        pytest.skip("available memory unknown here")
    storage = LazyTensorStorage(free // 4 + 10**6)
    with pytest.raises(StorageMemoryError, match=r"GiB \(4 bytes per item x \d+ items\)"):
        storage.set(slice(0, 1), torch.zeros(1))
    assert len(storage) == 0


def test_ndim2_storage_layout():
    data, _ = rollout(3, 5, seed=0)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(30, ndim=2), batch_size=16)
    rb.extend(data)
    assert len(rb) == 15 and rb.storage.shape == (3, 5)
    s = rb.sample()
    assert s["index"].shape == (16, 2)
    env, t = s["index"].unbind(-1)
    assert torch.equal(s["observation"], data["observation"][env, t])


def test_compact_storage_matches_plain_layout():
    plain = LazyTensorStorage(150)
    compact = LazyTensorStorage(150, compact_keys=["observation"])
    state = None
    for seed in range(6):  # 6 collector batches of 4 envs x 10 steps, flattened; wraps the ring
        batch, state = rollout(4, 10, seed=seed, state=state)
        flat = batch.reshape(-1)
        for rb in (plain, compact):
            TensorDictReplayBuffer(storage=rb).extend(flat.clone())
    assert len(plain) == len(compact) == 150
    index = torch.arange(150)
    a, b = plain.get(index), compact.get(index)
    assert (a == b).all()
    assert batch["next", "truncated"].any() and batch["next", "terminated"].any()
    # only episode ends and the seams between env rows keep their next obs
    kept = int((compact._compact.slot >= 0).sum())
    ends = int(a["next", "done"].sum())
    assert ends <= kept <= ends + 6 * 4


def test_compact_layout_halves_observation_memory_on_collected_data():
    # 3 collector batches of 8 envs x 1000 steps (obs 17 float32, episodes of 100-1000 steps),
    # flattened env-major as a collector's [envs, time] batch is; wraps a 16000-item ring
    cap, envs, steps = 16_000, 8, 1000
    plain = LazyTensorStorage(cap)
    compact = LazyTensorStorage(cap, compact_keys=["observation"])
    kept_bound = 0
    for seed in range(3):
        flat = collected(envs, steps, 17, seed).reshape(-1)
        for storage in (plain, compact):
            TensorDictReplayBuffer(storage=storage).extend(flat.clone())
        kept_bound += int(flat["next", "done"].sum()) + envs  # episode ends + env seams
    assert flat["next", "terminated"].any() and flat["next", "truncated"].any()
    index = torch.arange(cap)
    assert (plain.get(index) == compact.get(index)).all()
    # bytes of the entries that are not observations: the same in both layouts
    other = cap * sum(
        flat.get(k)[0].numel() * flat.get(k).element_size()
        for k in flat.keys(include_nested=True, leaves_only=True)
        if k not in ("observation", ("next", "observation"))
    )
    obs_plain, obs_compact = plain.nbytes() - other, compact.nbytes() - other
    assert obs_plain == cap * 2 * 17 * 4
    assert cap * 17 * 4 <= obs_compact <= 0.55 * obs_plain
    assert int((compact._compact.slot >= 0).sum()) <= kept_bound


def test_max_value_writer_keeps_top_ranked():
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(5), writer=TensorDictMaxValueWriter(rank_key="r")
    )
    ranks = torch.randperm(40).float()
    for chunk in ranks.split(7):
        data = transitions(chunk.numel())
        data["r"] = chunk
        rb.extend(data)
    stored = rb.storage.get(torch.arange(len(rb)))["r"]
    assert torch.equal(stored.sort().values, ranks.sort().values[-5:])


def test_list_storage_batch_larger_than_capacity_keeps_the_last_items():
    rb = ReplayBuffer(storage=ListStorage(3), batch_size=3)
    rb.extend([torch.tensor([i]) for i in range(5)])  # writes 0, 1, 2, 0, 1: 3 and 4 win
    assert [int(x) for x in rb.storage.get(torch.arange(3))] == [3, 4, 2]
    assert rb.writer._cursor == 2


def test_list_storage_refuses_a_hole():
    storage = ListStorage(5)
    with pytest.raises(IndexError, match="position 2 with 0 items stored"):
        storage.set(torch.tensor([0, 2]), ["a", "b"])
    assert len(storage) == 0


def test_tensor_storage_writes_into_a_preallocated_tensor():
    backing = torch.zeros(6)
    rb = ReplayBuffer(storage=TensorStorage(backing), batch_size=2)
    rb.extend(torch.arange(1.0, 5.0))
    assert backing.tolist() == [1.0, 2.0, 3.0, 4.0, 0.0, 0.0] and len(rb) == 4
    assert rb.storage.max_size == 6


def test_tensor_storage_from_an_empty_tensordict_takes_the_capacity():
    from tensordict import TensorDict

    rb = ReplayBuffer(storage=TensorStorage(TensorDict(batch_size=[5])), batch_size=2)
    rb.extend(TensorDict(a=torch.arange(7), batch_size=[7]))
    assert len(rb) == 5 and sorted(rb[:]["a"].tolist()) == [2, 3, 4, 5, 6]


@pytest.mark.parametrize("cls", [LazyTensorStorage, LazyMemmapStorage])
def test_storage_attribute_is_the_whole_capacity_sharing_memory(cls):
    # TorchRL scripts read storage._storage[index]
    storage = cls(6)
    assert storage._storage is None
    storage.set(
        slice(0, 3), TensorDict(a=torch.arange(3.0), b={"c": torch.ones(3, 2)}, batch_size=[3])
    )
    whole = storage._storage
    assert whole.batch_size == torch.Size([6]) and whole["b", "c"].shape == (6, 2)
    assert whole[:3]["a"].tolist() == [0.0, 1.0, 2.0]
    whole["a"][1] = 7.0
    assert storage.get(torch.tensor([1]))["a"].tolist() == [7.0]


def test_a_pytree_batch_larger_than_the_storage_keeps_its_newest_items():
    storage_buffer = ReplayBuffer(storage=LazyTensorStorage(3))
    data = {"a": torch.arange(5), "b": {"c": [torch.arange(5.0) * 2]}, 30: torch.zeros(5, 2)}
    storage_buffer.extend(data)
    kept = storage_buffer.storage.get(torch.arange(3))
    assert sorted(kept["a"].tolist()) == [2, 3, 4]
    assert sorted(kept["b"]["c"][0].tolist()) == [4.0, 6.0, 8.0]


@pytest.mark.parametrize("cls", [LazyTensorStorage, LazyMemmapStorage])
def test_samples_carry_the_storage_device(cls):
    rb = TensorDictReplayBuffer(storage=cls(8, ndim=2), batch_size=3)
    rb.extend(TensorDict(a=torch.zeros(2, 4), b={"c": torch.ones(2, 4)}, batch_size=[2, 4]))
    sample = rb.sample()
    assert sample.device == torch.device("cpu") and sample["b"].device == torch.device("cpu")
    assert rb[:].device == torch.device("cpu")


def test_tensor_storage_takes_ranges_and_lists_as_positions():
    storage = LazyTensorStorage(10)
    storage.set(range(4), torch.arange(4.0))
    storage.set([4, 5], torch.tensor([40.0, 50.0]))
    assert storage.get(range(6)).tolist() == [0.0, 1.0, 2.0, 3.0, 40.0, 50.0]
    assert storage.get([5, 0]).tolist() == [50.0, 0.0]


def test_lazy_stack_storage_samples_ragged_tensordicts():
    from rl_buffers import LazyStackStorage, ReplayBuffer

    rb = ReplayBuffer(storage=LazyStackStorage(10))
    rb.add(TensorDict(a=torch.zeros(2), name="short"))
    rb.add(TensorDict(a=torch.ones(3), name="long"))
    sample = rb.sample(6)
    assert type(sample).__name__ == "LazyStackedTensorDict" and sample.shape == (6,)
    for item, name in zip(sample.unbind(0), sample["name"], strict=True):
        assert item["a"].shape[0] == (2 if name == "short" else 3)


def test_memmap_cleanup(tmp_path):
    kept = LazyMemmapStorage(10, scratch_dir=tmp_path / "kept")
    assert kept._auto_cleanup is False and LazyMemmapStorage(10)._auto_cleanup is True
    storage = LazyMemmapStorage(10, scratch_dir=tmp_path / "mine", auto_cleanup=True)
    assert storage.cleanup() is False  # nothing written yet
    storage.set(slice(0, 2), TensorDict(a=torch.zeros(2), batch_size=[2]))
    assert storage.cleanup() is True and not (tmp_path / "mine").exists()
    assert storage.cleanup() is False
    temp = LazyMemmapStorage(10)
    temp.set(slice(0, 2), torch.zeros(2))
    directory = temp.scratch_dir
    del temp
    assert not directory.exists()  # removed when the storage is garbage-collected
