"""Slot generations: write stamps kept on the storage, sampled as "index_generation"."""

from __future__ import annotations

import pytest
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


def _patchable(size: int = 6) -> tuple[TensorDictReplayBuffer, torch.Tensor, torch.Tensor]:
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(size), writer=RoundRobinWriter(track_generations=True)
    )
    data = TensorDict(obs=torch.zeros(size, 2), version=torch.full((size,), 5), batch_size=[size])
    index = rb.extend(data)
    return rb, index, rb.writer.generations_of(index)


def test_update_if_present_skips_rewritten_slots() -> None:
    rb, index, handle = _patchable()
    rb.extend(
        TensorDict(obs=torch.ones(2, 2), version=torch.zeros(2, dtype=torch.int64), batch_size=[2])
    )
    result = rb.update_if_present(
        index=index, generation=handle, patch={"obs": torch.full((6, 2), 7.0)}
    )
    assert result.updated.tolist() == [False, False, True, True, True, True]
    assert (result.updated_count, result.stale_count, result.version_rejected) == (4, 2, None)
    assert rb[:]["obs"][:, 0].tolist() == [1.0, 1.0, 7.0, 7.0, 7.0, 7.0]


def test_update_if_present_versions_and_duplicates() -> None:
    rb, index, handle = _patchable()
    versions = torch.tensor([6, 5, 4, 9, 9, 9])
    result = rb.update_if_present(index=index, generation=handle, patch={"obs": torch.ones(6, 2)},
                                  version_key="version", version=versions, require_newer=True)  # fmt: skip
    assert result.updated.tolist() == [True, False, False, True, True, True]
    assert result.version_rejected.tolist() == [False, True, True, False, False, False]
    assert rb[:]["version"].tolist() == [6, 5, 5, 9, 9, 9]
    # two rows on slot 1: the higher version wins whatever the order
    dup = rb.update_if_present(index=torch.tensor([1, 1]), generation=handle[[1, 1]],
                               patch={"obs": torch.tensor([[2.0, 2.0], [3.0, 3.0]])},
                               version_key="version", version=torch.tensor([8, 7]))  # fmt: skip
    assert dup.updated.tolist() == [True, False] and rb[:]["obs"][1].tolist() == [2.0, 2.0]


def test_update_if_present_checks_everything_before_writing() -> None:
    rb, index, handle = _patchable()
    before = rb[:].clone()
    with pytest.raises(ValueError, match="dtype"):
        rb.update_if_present(index=index, generation=handle,
                             patch={"obs": torch.ones(6, 2), "version": torch.ones(6)})  # fmt: skip
    with pytest.raises(KeyError):
        rb.update_if_present(index=index, generation=handle, patch={"nope": torch.ones(6)})
    with pytest.raises(ValueError, match="may not appear"):
        rb.update_if_present(index=index, generation=handle, patch={"version": torch.ones(6, dtype=torch.int64)},
                             version_key="version", version=6)  # fmt: skip
    with pytest.raises(ValueError, match="Dotted"):
        rb.update_if_present(index=index, generation=handle, patch={}, version_key="a.b", version=6)
    assert (rb[:] == before).all()
    plain = TensorDictReplayBuffer(storage=LazyTensorStorage(3))
    plain.extend(TensorDict(obs=torch.zeros(3), batch_size=[3]))
    with pytest.raises(RuntimeError, match="conditional"):
        plain.update_if_present(index=torch.arange(3), generation=torch.zeros(3), patch={})
