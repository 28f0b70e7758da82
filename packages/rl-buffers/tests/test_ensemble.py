"""ReplayBufferEnsemble: sub-batches of several buffers, stacked (TorchRL's layout and ids)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import LazyTensorStorage, ReplayBuffer, ReplayBufferEnsemble


def _buffers() -> list[ReplayBuffer]:
    rbs = []
    for i in range(3):
        rb = ReplayBuffer(storage=LazyTensorStorage(20))
        rb.extend(TensorDict(root=torch.full((20,), i), batch_size=[20]))
        rbs.append(rb)
    return rbs


def test_probabilities_shape_and_buffer_ids() -> None:
    torch.manual_seed(0)
    rb = ReplayBufferEnsemble(*_buffers(), p=[0.0, 0.9, 0.1], batch_size=48)
    sample, info = rb.sample(return_info=True)
    assert sample.shape == (3, 16)  # num_buffer_sampled defaults to the number of buffers
    ids = sample["index", "buffer_ids"]
    assert 0 not in ids.unique().tolist()
    # Each sub-batch comes from the buffer its id names (the buffers hold their id).
    assert torch.equal(sample["root"], ids)
    assert torch.equal(info["buffer_ids"], ids[:, 0])
    assert info["index"].shape == (3, 16) and torch.equal(sample["index", "index"], info["index"])
    two = ReplayBufferEnsemble(*_buffers(), num_buffer_sampled=2, batch_size=48).sample()
    assert two.shape == (2, 24)


def test_sample_from_all_indexing_and_errors() -> None:
    rbs = _buffers()
    rb = ReplayBufferEnsemble(*rbs, sample_from_all=True)
    assert rb.sample(6)["root"].tolist() == [[0, 0], [1, 1], [2, 2]]
    assert rb[1] is rbs[1] and rb[:] is rb and len(rb) == 60
    sub = rb[torch.tensor([0, 2])]
    assert sub.sample(4)["root"].tolist() == [[0, 0], [2, 2]]
    assert rb[2, 0]["root"].item() == 2
    with pytest.raises(ValueError, match="multiple of num_buffer_sampled"):
        rb.sample(7)
    with pytest.raises(ValueError, match="exclude"):
        ReplayBufferEnsemble(*rbs, p=[1, 1, 1], sample_from_all=True)
    with pytest.raises(ValueError, match="3 buffers"):
        ReplayBufferEnsemble(*rbs, p=[1, 1])
    with pytest.raises(RuntimeError, match="extend one of its buffers"):
        rb.extend(torch.zeros(2))


def test_tensor_buffers_stack_and_transform() -> None:
    a, b = (ReplayBuffer(storage=LazyTensorStorage(5)) for _ in range(2))
    a.extend(torch.zeros(5))
    b.extend(torch.ones(5))
    rb = ReplayBufferEnsemble(a, b, sample_from_all=True, transform=lambda x: x + 10)
    assert rb.sample(4).tolist() == [[10.0, 10.0], [11.0, 11.0]]
