"""``replacement=False`` (TorchRL's spelling) picks the without-replacement samplers."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import (
    LazyTensorStorage,
    PrioritizedSampler,
    PrioritizedSliceSampler,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
)


def test_random_sampler_replacement_false_is_sampler_without_replacement():
    assert type(RandomSampler(replacement=True)) is RandomSampler
    sampler = RandomSampler(replacement=False, drop_last=True, shuffle=False)
    assert type(sampler) is SamplerWithoutReplacement
    assert sampler.drop_last is True and sampler.shuffle is False
    rb = ReplayBuffer(storage=LazyTensorStorage(7), sampler=RandomSampler(replacement=False))
    rb.extend(torch.arange(7))
    seen = torch.cat([rb.sample(3), rb.sample(3), rb.sample(3)])
    assert sorted(seen.tolist()) == list(range(7))  # one epoch: each item once


def test_slice_sampler_replacement_false_is_slice_sampler_without_replacement():
    sampler = SliceSampler(replacement=False, slice_len=2, traj_key="traj", shuffle=False)
    assert type(sampler) is SliceSamplerWithoutReplacement
    assert isinstance(sampler, SamplerWithoutReplacement)
    assert sampler.slice_len == 2 and sampler.shuffle is False and sampler.traj_key == "traj"
    storage = LazyTensorStorage(8)
    storage.set(slice(0, 8), TensorDict(traj=torch.arange(8) // 2, batch_size=[8]))
    batches = [sampler.sample(storage, 4)[0].tolist() for _ in range(2)]
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7]] and sampler.ran_out


def test_no_without_replacement_variant_raises():
    with pytest.raises(TypeError, match="no without-replacement variant"):
        PrioritizedSampler(10, alpha=0.5, beta=0.5, replacement=False)
    with pytest.raises(TypeError, match="no without-replacement variant"):
        PrioritizedSliceSampler(10, 0.5, 0.5, slice_len=2, replacement=False)
    with pytest.raises(ValueError, match="contradicts"):
        SamplerWithoutReplacement(replacement=True)


def test_traj_key_is_reported_as_given_or_as_found():
    assert SliceSampler(slice_len=2, traj_key="ep").traj_key == "ep"
    sampler = SliceSampler(slice_len=2)
    assert sampler.traj_key is None
    storage = LazyTensorStorage(6)
    data = TensorDict({("collector", "traj_ids"): torch.tensor([0, 0, 1, 1, 2, 2])}, [6])
    storage.set(slice(0, 6), data)
    sampler.sample(storage, 4)
    assert sampler.traj_key == ("collector", "traj_ids")


def test_slice_sampler_info_keys_and_cache_cleared_by_buffer_writes():
    torch.manual_seed(0)
    done = torch.zeros(8, 1, dtype=torch.bool)
    done[[3, 7]] = True
    data = TensorDict(done=done, terminated=done, obs=torch.arange(8), batch_size=[8])
    sampler = SliceSampler(slice_len=2, end_key="done", truncated_key="truncated")
    rb = ReplayBuffer(storage=LazyTensorStorage(8), sampler=sampler, batch_size=4)
    rb.extend(data)
    _, info = rb.sample(return_info=True)
    # root keys come back as the strings they were given, as in TorchRL
    assert {"truncated", "done", "terminated"} <= set(info)
    assert info["truncated"].view(2, 2)[:, -1].all()
    assert sampler._cache is not None
    rb.extend(data)
    assert sampler._cache is None


def test_prioritized_update_from_extend_index_of_a_2d_storage():
    sampler = PrioritizedSampler(12, alpha=1.0, beta=1.0, eps=0.0, backend="torch")
    rb = ReplayBuffer(storage=LazyTensorStorage(12, ndim=2), sampler=sampler, batch_size=2)
    index = rb.extend(TensorDict(x=torch.zeros(2, 6), batch_size=[2, 6]))
    priority = torch.arange(12.0).reshape(2, 6) + 1
    rb.update_priority(index, priority)  # [T] time positions, [envs, T] priorities
    flat = rb.storage.flat_position(torch.tensor([[1, 2], [0, 5]]))
    assert [float(sampler._sum_tree[int(i)]) for i in flat] == [9.0, 6.0]
