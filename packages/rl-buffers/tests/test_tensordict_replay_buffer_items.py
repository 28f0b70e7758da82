"""TensorDictReplayBuffer with items that carry their own batch dims (a ListStorage of trajectories)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import ListStorage, PrioritizedSampler, TensorDictReplayBuffer


def _trajectories() -> TensorDict:
    return TensorDict(obs=torch.arange(12.0).reshape(3, 4), batch_size=[3, 4])


def test_index_repeats_over_each_items_steps():
    rb = TensorDictReplayBuffer(storage=ListStorage(10), batch_size=5)
    data = _trajectories()
    rb.extend(data)
    assert data["index"].tolist() == [[0] * 4, [1] * 4, [2] * 4]
    sample = rb.sample()
    assert sample.batch_size == (5, 4)
    # each sampled trajectory's index is its row in the written data
    expected = data["obs"][sample["index"][:, 0]]
    assert torch.equal(sample["obs"], expected)
    assert bool((sample["index"] == sample["index"][:, :1]).all())


def test_priority_update_from_per_step_errors():
    sampler = PrioritizedSampler(10, alpha=1.0, beta=1.0, eps=0.0, reduction="max", backend="torch")
    rb = TensorDictReplayBuffer(storage=ListStorage(10), sampler=sampler, batch_size=3)
    rb.extend(_trajectories())
    assert rb.sample()["priority_weight"].shape == (3, 4)
    batch = TensorDict(
        index=torch.tensor([[0] * 4, [2] * 4]),
        td_error=torch.tensor([[1.0, 5.0, 2.0, 0.0], [0.5, 0.0, 7.0, 3.0]]),
        batch_size=[2, 4],
    )
    rb.update_tensordict_priority(batch)
    # one priority per trajectory: the max over its steps
    assert float(sampler._sum_tree[0]) == pytest.approx(5.0)
    assert float(sampler._sum_tree[2]) == pytest.approx(7.0)
    assert float(sampler._sum_tree[1]) == pytest.approx(1.0)  # untouched: the default


def test_include_info_is_deprecated_and_false_leaves_the_index_out():
    rb = TensorDictReplayBuffer(storage=ListStorage(10), batch_size=2)
    rb.extend(TensorDict(obs=torch.zeros(3, 1), batch_size=[3]))
    with pytest.warns(DeprecationWarning, match="return_info"):
        sample = rb.sample(include_info=False)
    assert "index" not in sample
    with pytest.warns(DeprecationWarning):
        assert "index" in rb.sample(include_info=True)
