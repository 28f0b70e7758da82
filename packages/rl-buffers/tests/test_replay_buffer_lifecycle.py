"""Building, counting, copying and rewriting a buffer: delayed_init, stats, state_dict, in-place writes."""

import json
import pickle
from functools import partial

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import (
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorDictMaxValueWriter,
    TensorDictReplayBuffer,
)


def _td(n: int, start: float = 0.0) -> TensorDict:
    return TensorDict(
        a=torch.arange(n, dtype=torch.float32) + start, b=torch.ones(n), batch_size=[n]
    )


def test_delayed_init_builds_factories_on_first_use():
    built = []

    def make_storage():
        built.append("storage")
        return LazyTensorStorage(10)

    rb = ReplayBuffer(storage=make_storage, sampler=RandomSampler, delayed_init=True, batch_size=2)
    assert not rb.initialized and built == [] and len(rb) == 0
    rb.extend(torch.arange(4))
    assert rb.initialized and built == ["storage"]
    assert isinstance(rb.storage, LazyTensorStorage) and isinstance(rb.sampler, RandomSampler)


def test_factories_are_called_at_construction_without_delayed_init():
    rb = ReplayBuffer(storage=partial(LazyTensorStorage, 7))
    assert rb.initialized and rb.storage.max_size == 7


def test_transform_factory_delays_init_by_default_and_is_exclusive_with_transform():
    rb = ReplayBuffer(storage=LazyTensorStorage(4), transform_factory=lambda: lambda x: x * 2)
    assert not rb.initialized
    rb.extend(torch.ones(2))
    assert rb.sample(2).tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="not both"):
        ReplayBuffer(transform=abs, transform_factory=lambda: abs)


def test_stats_counts_items_and_never_initializes():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), delayed_init=True)
    stats = rb.stats()
    assert stats == {"size": 0, "write_count": 0, "prefetch_queue_size": 0, "initialized": False,
                     "capacity": 10, "utilization": 0.0}  # fmt: skip
    assert not rb.initialized
    rb.extend(torch.arange(15))
    stats = json.loads(json.dumps(rb.stats()))
    assert (stats["size"], stats["write_count"], stats["utilization"]) == (10, 15, 1.0)
    rb.empty(empty_write_count=False)
    assert (rb.stats()["size"], rb.stats()["write_count"]) == (0, 15)
    rb.empty()
    assert rb.stats()["write_count"] == 0


def test_state_dict_round_trip_replays_the_same_samples():
    rb = ReplayBuffer(storage=LazyTensorStorage(100), generator=torch.Generator().manual_seed(3))
    rb.extend(torch.arange(100))
    state = rb.state_dict()
    first = rb.sample(16)
    other = ReplayBuffer(storage=LazyTensorStorage(100), generator=torch.Generator())
    other.load_state_dict(state)
    assert torch.equal(other.sample(16), first)
    rb.load_state_dict(state)
    assert torch.equal(rb.sample(16), first)


def test_state_dict_of_a_list_storage_and_a_prioritized_sampler():
    rb = ReplayBuffer(storage=ListStorage(5), sampler=PrioritizedSampler(5, 0.7, 0.9), batch_size=2)
    rb.extend(["a", "b", "c"])
    rb.update_priority(torch.tensor([0, 1, 2]), torch.tensor([1.0, 0.0, 0.0]))
    other = ReplayBuffer(storage=ListStorage(5), sampler=PrioritizedSampler(5, 0.7, 0.9))
    other.load_state_dict(rb.state_dict())
    assert len(other) == 3 and other.sample(8) == ["a"] * 8


def test_dumps_keeps_the_generator_state(tmp_path):
    rb = ReplayBuffer(storage=LazyTensorStorage(100), generator=torch.Generator().manual_seed(0))
    rb.extend(torch.arange(100))
    rb.dumps(tmp_path / "rb")
    first = rb.sample(32)
    rb.loads(tmp_path / "rb")
    assert torch.equal(rb.sample(32), first)


def test_a_prefetching_buffer_pickles_and_keeps_working():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2, prefetch=2)
    rb.extend(torch.arange(10))
    rb.sample()
    copy = pickle.loads(pickle.dumps(rb))
    assert len(copy) == 10 and copy.sample().shape == (2,)


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_a_prioritized_buffer_pickles_with_its_priorities(backend):
    # the compiled segment tree's kernels (a torch.ops namespace) did not pickle
    rb = ReplayBuffer(
        storage=LazyTensorStorage(8), sampler=PrioritizedSampler(8, 1.0, 1.0, backend=backend)
    )
    rb.extend(torch.arange(8))
    rb.update_priority(torch.arange(8), torch.tensor([0.0] * 7 + [2.0]))
    copy = pickle.loads(pickle.dumps(rb))
    assert copy.sampler.priorities().tolist() == rb.sampler.priorities().tolist()
    assert copy.sample(4).tolist() == [7, 7, 7, 7]


def test_shared_buffers_refuse_prefetch():
    with pytest.raises(ValueError, match="cannot prefetch"):
        ReplayBuffer(shared=True, prefetch=2)
    rb = ReplayBuffer(prefetch=2)
    with pytest.raises(ValueError, match="cannot prefetch"):
        rb.share()
    assert ReplayBuffer().share().shared


def test_setitem_overwrites_stored_items():
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(torch.arange(5.0))
    rb[1] = torch.tensor(10.0)
    rb[3:5] = torch.tensor([30.0, 40.0])
    assert rb[:].tolist() == [0.0, 10.0, 2.0, 30.0, 40.0]
    with pytest.raises(IndexError, match="holds 5 items"):
        rb[torch.tensor([7])] = torch.tensor([1.0])
    lists = ReplayBuffer(storage=ListStorage(4))
    lists.extend(["x", "y"])
    lists[0] = "z"
    assert lists[:] == ["z", "y"]


def test_set_at_set_and_update_write_entries_in_place():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(_td(6))
    rb.set_at_("a", torch.tensor([99.0, 98.0]), torch.tensor([2, 5]))
    assert rb["a"].tolist() == [0.0, 1.0, 99.0, 3.0, 4.0, 98.0]
    rb.set_("b", torch.full((6,), 4.0))
    assert (rb["b"] == 4.0).all()
    rb.update_(_td(6, start=100.0))
    assert rb["a"].tolist() == [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]
    with pytest.raises(KeyError, match="no entry"):
        rb.set_("missing", torch.zeros(6))
    with pytest.raises(TypeError, match="tensor storage"):
        ReplayBuffer(storage=ListStorage(3)).set_("a", torch.zeros(1))


def test_max_value_writer_median_and_clear_error_on_plain_tensors():
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(2),
        writer=TensorDictMaxValueWriter(rank_key="r", reduction="median"),
    )
    r = torch.tensor([[1.0, 5.0, 2.0], [9.0, 0.0, 0.0], [3.0, 3.0, 4.0]])  # medians 2, 0, 3
    rb.extend(TensorDict(r=r, i=torch.arange(3), batch_size=[3]))
    assert sorted(rb["i"].tolist()) == [0, 2]
    plain = ReplayBuffer(storage=LazyTensorStorage(2), writer=TensorDictMaxValueWriter())
    with pytest.raises(RuntimeError, match="expects data to be a tensor collection"):
        plain.extend(torch.zeros(2))


def test_max_value_writer_on_a_list_storage_takes_single_tensordicts():
    rb = TensorDictReplayBuffer(
        storage=ListStorage(2), writer=TensorDictMaxValueWriter(rank_key="r")
    )
    assert rb.writer._cursor == 0
    for r in (1.0, 7.0, 3.0):
        rb.add(TensorDict(r=torch.tensor(r), batch_size=[]))
        assert rb.writer._cursor == len(rb) % 2
    assert sorted(float(item["r"]) for item in rb.storage.get(torch.arange(2))) == [3.0, 7.0]


def test_drop_last_needs_a_buffer_batch_size():
    with pytest.raises(ValueError, match="drop_last=True must work with a predictable batch-size"):
        ReplayBuffer(sampler=SamplerWithoutReplacement(drop_last=True))
    rb = ReplayBuffer(sampler=SamplerWithoutReplacement(drop_last=True), batch_size=2)
    rb.extend(torch.arange(5))
    epoch = torch.cat([rb.sample(), rb.sample()])  # 2 full batches of 5 items, the 5th dropped
    assert epoch.unique().numel() == 4 and rb.sampler.ran_out


def test_read_all_in_order_and_write_all_round_trip():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(TensorDict(obs=torch.arange(6), batch_size=[6]))
    head = rb.read_all_in_order(end=3)
    head["obs"] = head["obs"] + 10
    rb.write_all(head)
    assert rb.read_all_in_order()["obs"].tolist() == [10, 11, 12, 3, 4, 5]
