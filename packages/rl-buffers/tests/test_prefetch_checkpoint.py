"""Prefetched batches survive state_dict, dumps and pickling; epochs end on the caller's batch."""

from __future__ import annotations

import pickle

import pytest
import torch

from rl_buffers import LazyTensorStorage, ListStorage, ReplayBuffer, SamplerWithoutReplacement


def _rb(seed: int = 0, prefetch: int = 2, **kwargs) -> ReplayBuffer:
    rb = ReplayBuffer(storage=kwargs.pop("storage", ListStorage(20)), batch_size=3, prefetch=prefetch,
                      generator=torch.Generator().manual_seed(seed), **kwargs)  # fmt: skip
    rb.extend(torch.arange(float(rb.storage.max_size)))
    return rb


def _same_next_batches(a: ReplayBuffer, b: ReplayBuffer) -> None:
    for _ in range(4):
        (x, xi), (y, yi) = a.sample(return_info=True), b.sample(return_info=True)
        assert torch.equal(x, y) and torch.equal(xi["index"], yi["index"])


@pytest.mark.parametrize("how", ["state_dict", "dumps", "pickle"])
def test_restored_buffer_samples_what_the_original_would(tmp_path, how) -> None:
    source = _rb(storage=LazyTensorStorage(20))
    source.sample()  # fills the queue
    if how == "pickle":
        restored = pickle.loads(pickle.dumps(source))
    else:
        restored = _rb(seed=1, storage=LazyTensorStorage(20))
        restored.sample()  # its own queue, in flight, must not leak into the loaded state
        if how == "state_dict":
            restored.load_state_dict(source.state_dict())
        else:
            source.dumps(tmp_path / "ck")
            restored.loads(tmp_path / "ck")
    _same_next_batches(source, restored)


def test_saved_queue_is_a_copy_and_capacity_is_checked() -> None:
    source = _rb()
    source.sample()
    state = source.state_dict()
    state["_prefetch_state"]["queue"][0][0].fill_(-1)
    assert not bool((source._prefetch_queue[0].result()[0] == -1).all())
    smaller = _rb(prefetch=1)
    with pytest.raises(RuntimeError, match="prefetch queue with capacity 2"):
        smaller.load_state_dict(state)


def test_iterating_a_prefetching_buffer_stops_at_the_epoch_end() -> None:
    rb = _rb(sampler=SamplerWithoutReplacement(), storage=ListStorage(9))
    seen = torch.cat(list(rb))
    assert sorted(seen.tolist()) == list(range(9))
