"""Consuming buffers: items leave after n draws, their slots are refilled first."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import (
    ConsumingSampler,
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    ReplayBuffer,
    RoundRobinWriter,
    TensorDictReplayBuffer,
)


def test_each_item_is_drawn_n_times_then_leaves() -> None:
    rb = ReplayBuffer(storage=ListStorage(4), batch_size=4, consume_after_n_samples=2)
    rb.extend([torch.tensor(i) for i in range(4)])
    assert sorted(rb.sample().tolist()) == [0, 1, 2, 3] and len(rb) == 4
    assert sorted(rb.sample().tolist()) == [0, 1, 2, 3] and len(rb) == 0
    with pytest.raises(RuntimeError, match="empty storage"):
        rb.sample()


def test_iteration_stops_when_everything_is_consumed() -> None:
    rb = ReplayBuffer(storage=ListStorage(5), batch_size=2, sampler=ConsumingSampler())
    rb.extend([torch.tensor(i) for i in range(5)])
    seen = [x for batch in rb for x in batch.tolist()]
    assert sorted(seen) == [0, 1, 2, 3, 4] and len(rb) == 0


def test_writes_refill_consumed_slots_before_the_cursor() -> None:
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), consume_after_n_samples=1)
    rb.extend(TensorDict(a=torch.arange(6), batch_size=[6]))
    consumed = rb.sample(2)["index"]
    assert len(rb) == 4
    index = rb.extend(TensorDict(a=torch.arange(100, 104), batch_size=[4]))
    assert index.tolist() == [*consumed.tolist(), 6, 7] and len(rb) == 8
    assert rb.storage.get(index)["a"].tolist() == [100, 101, 102, 103]


def test_consumption_survives_state_dict() -> None:
    rb = ReplayBuffer(storage=LazyTensorStorage(5), batch_size=2, consume_after_n_samples=1)
    rb.extend(torch.arange(5))
    consumed = rb.sample(return_info=True)[1]["index"]
    copy = ReplayBuffer(storage=LazyTensorStorage(5), batch_size=2, consume_after_n_samples=1)
    copy.load_state_dict(rb.state_dict())
    assert len(copy) == 3
    assert copy.extend(torch.tensor([7, 8])).tolist() == consumed.tolist()


def test_unsupported_combinations_raise() -> None:
    with pytest.raises(ValueError, match="Prefetching is not supported"):
        ReplayBuffer(storage=ListStorage(4), consume_after_n_samples=1, prefetch=1, batch_size=2)
    with pytest.raises(ValueError, match="only supports the default RandomSampler"):
        ReplayBuffer(
            storage=ListStorage(4),
            sampler=PrioritizedSampler(4, 1.0, 1.0),
            consume_after_n_samples=1,
        )
    with pytest.raises(ValueError, match="1-dimensional"):
        ReplayBuffer(storage=LazyTensorStorage(4, ndim=2), sampler=ConsumingSampler())

    class NoWriteAt(RoundRobinWriter):
        write_at = None

    with pytest.raises(TypeError, match="callable write_at"):
        ReplayBuffer(storage=ListStorage(4), writer=NoWriteAt(), consume_after_n_samples=1)
