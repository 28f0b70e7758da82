"""Indexing and iterating storages and buffers (TorchRL's ``storage[i]``, ``rb[:3]``, ``rb["key"]``)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import LazyMemmapStorage, LazyTensorStorage, ListStorage, ReplayBuffer


@pytest.mark.parametrize("make", [LazyTensorStorage, LazyMemmapStorage])
def test_tensor_storage_int_slice_tensor_and_iteration(make) -> None:
    storage = make(10)
    data = TensorDict(obs=torch.arange(6.0).unsqueeze(-1), batch_size=[6])
    storage.set(slice(0, 6), data)
    assert storage[2]["obs"].tolist() == [2.0]
    assert storage[-1]["obs"].tolist() == [5.0]
    assert storage[1:4]["obs"].flatten().tolist() == [1.0, 2.0, 3.0]
    assert storage[torch.tensor([5, 0])]["obs"].flatten().tolist() == [5.0, 0.0]
    assert [float(item["obs"]) for item in storage] == [0, 1, 2, 3, 4, 5]
    with pytest.raises(IndexError, match="out of range"):
        storage[6]  # only the filled range is indexable


def test_list_storage_items_and_pytrees() -> None:
    storage = ListStorage(5)
    storage.set(torch.arange(3), [{"a": 1}, "b", 3])
    assert storage[0] == {"a": 1} and storage[1:] == ["b", 3]
    assert list(storage) == [{"a": 1}, "b", 3]
    pytree_storage = LazyTensorStorage(4)
    pytree_storage.set(slice(0, 2), {"x": torch.tensor([1.0, 2.0])})
    assert float(pytree_storage[1]["x"]) == 2.0


def test_two_d_storage_indexes_envs_then_time() -> None:
    storage = LazyTensorStorage(12, ndim=2)
    obs = torch.arange(6.0).reshape(2, 3)  # 2 envs x 3 steps
    storage.set(slice(0, 3), TensorDict(obs=obs, batch_size=[2, 3]))
    assert storage[1]["obs"].tolist() == [3.0, 4.0, 5.0]
    assert storage[0, 2]["obs"].item() == 2.0
    assert storage[:, 1]["obs"].tolist() == [1.0, 4.0]
    assert [float(x["obs"]) for x in storage] == obs.flatten().tolist()


def test_buffer_getitem_slices_keys_and_applies_transforms() -> None:
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(TensorDict(obs=torch.arange(5.0), batch_size=[5]))
    assert rb[:3]["obs"].tolist() == [0.0, 1.0, 2.0]
    assert rb[3]["obs"].item() == 3.0
    assert rb["obs"].tolist() == [0, 1, 2, 3, 4]
    rb.append_transform(lambda td: td.set("obs", td["obs"] * 10))
    assert rb[1:3]["obs"].tolist() == [10.0, 20.0]

    list_rb = ReplayBuffer()  # ListStorage: a batch is stacked (collate), an item is not
    list_rb.extend([torch.tensor(1.0), torch.tensor(2.0), torch.tensor(3.0)])
    assert list_rb[:2].tolist() == [1.0, 2.0] and list_rb[2].item() == 3.0


@pytest.mark.parametrize("make", [ListStorage, LazyTensorStorage, LazyMemmapStorage])
def test_compilable_flag_is_accepted_and_reads_under_compile(make) -> None:
    storage = make(8, compilable=True)
    assert storage.compilable and not make(8).compilable
    rb = ReplayBuffer(storage=storage, compilable=True)
    rb.extend(torch.arange(8.0) if make is not ListStorage else list(torch.arange(8.0)))
    index = torch.tensor([1, 5, 7])
    compiled = torch.compile(lambda i: rb[i], backend="eager")
    assert torch.equal(torch.as_tensor(compiled(index)), torch.tensor([1.0, 5.0, 7.0]))
    assert ReplayBuffer(compilable=True).storage.compilable


def test_writers_take_compilable() -> None:
    from rl_buffers import RoundRobinWriter, TensorDictMaxValueWriter, TensorDictRoundRobinWriter

    for writer in (
        RoundRobinWriter(compilable=True),
        TensorDictRoundRobinWriter(compilable=True),
        TensorDictMaxValueWriter(rank_key="r", compilable=True),
    ):
        rb = ReplayBuffer(storage=LazyTensorStorage(4), writer=writer)
        rb.extend(TensorDict(r=torch.arange(3.0), batch_size=[3]))
        assert sorted(rb[:]["r"].tolist()) == [0.0, 1.0, 2.0]


def test_list_storage_set_takes_an_int_a_range_or_a_list() -> None:
    storage = ListStorage(5)
    storage.set(0, {"a": 1})  # one item, even a dict
    storage.set(range(1, 3), ["b", "c"])
    storage.set([3], ["d"])
    assert list(storage) == [{"a": 1}, "b", "c", "d"]
    with pytest.raises(IndexError, match="position 7"):
        storage.set(7, "x")


def test_slice_samplers_accept_cache_values() -> None:
    from rl_buffers import PrioritizedSliceSampler, SliceSampler

    assert SliceSampler(slice_len=2, cache_values=True).cache_values
    assert PrioritizedSliceSampler(8, 1.0, 1.0, slice_len=2, cache_values=True).cache_values
