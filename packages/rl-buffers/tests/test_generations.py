"""Slot generations: write stamps kept on the storage, sampled as "index_generation"."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rl_buffers import (
    LazyTensorStorage,
    ReplayBuffer,
    RoundRobinWriter,
    TensorDictMaxValueWriter,
    TensorDictReplayBuffer,
)


def _tracked(size: int) -> ReplayBuffer:
    return ReplayBuffer(
        storage=LazyTensorStorage(size), writer=RoundRobinWriter(track_generations=True)
    )


def test_generations_count_every_write_of_a_slot() -> None:
    rb = _tracked(4)
    rb.extend(torch.arange(2))
    assert rb.writer.generations_of(torch.arange(4)).tolist() == [0, 0, -1, -1]
    rb.extend(
        torch.arange(8)
    )  # slots 2, 3, 0, 1, 2, 3, 0, 1 (the first four are overwritten in-batch)
    assert rb.writer.generations_of(torch.arange(4)).tolist() == [2, 2, 1, 1]
    assert rb.writer.generations_of(torch.tensor([-1, 4])).tolist() == [-1, -1]
    rb.empty()  # every handle goes stale; unwritten stays -1
    assert rb.writer.generations_of(torch.arange(4)).tolist() == [3, 3, 2, 2]


def test_untracked_buffers_pay_nothing() -> None:
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4))
    rb.extend(TensorDict(a=torch.arange(4), batch_size=[4]))
    assert getattr(rb.storage, "_slot_generations", None) is None
    assert "index_generation" not in rb.sample(2)
    assert rb.writer.generations_of(torch.arange(2)).tolist() == [-1, -1]
    assert TensorDictMaxValueWriter(rank_key="a").generations_of(torch.arange(2)).tolist() == [
        -1,
        -1,
    ]


def test_shared_storage_sees_every_writer_and_samples_carry_stamps() -> None:
    storage = LazyTensorStorage(4)
    tracked = TensorDictReplayBuffer(
        storage=storage, writer=RoundRobinWriter(track_generations=True)
    )
    other = TensorDictReplayBuffer(storage=storage)
    tracked.extend(TensorDict(a=torch.arange(4), batch_size=[4]))
    sample = tracked.sample(4)
    assert torch.equal(sample["index_generation"], torch.zeros(4, dtype=torch.int64))
    other.extend(TensorDict(a=torch.arange(2), batch_size=[2]))
    stale = tracked.writer.generations_of(sample["index"]) != sample["index_generation"]
    assert torch.equal(stale, sample["index"] < 2)


def test_generations_survive_state_dict_and_dumps(tmp_path) -> None:
    rb = _tracked(4)
    rb.extend(torch.arange(5))
    copy = _tracked(4)
    copy.load_state_dict(rb.state_dict())
    assert copy.writer.generations_of(torch.arange(4)).tolist() == [1, 0, 0, 0]
    assert copy.write_count == 5
    rb.writer.dumps(tmp_path)
    writer = RoundRobinWriter(track_generations=True)
    writer.loads(tmp_path)
    assert writer._cursor == 1 and writer.generations_of(torch.arange(4)).tolist() == [1, 0, 0, 0]


def test_write_at_moves_the_written_slots_only() -> None:
    writer = RoundRobinWriter(track_generations=True)
    writer.register_storage(LazyTensorStorage(4))
    writer.extend(torch.arange(4))
    writer.write_at(torch.tensor([0, 1]), torch.tensor([10, 11]))
    assert writer.generations_of(torch.arange(4)).tolist() == [1, 1, 0, 0]
    assert writer._cursor == 0
