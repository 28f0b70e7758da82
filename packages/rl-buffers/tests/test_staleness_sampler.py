"""StalenessAwareSampler: weights 1 / (staleness + 1), a hard staleness limit, clear errors."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import LazyTensorStorage, StalenessAwareSampler, TensorDictReplayBuffer


def _rb(versions: list[float], **kwargs) -> tuple[TensorDictReplayBuffer, StalenessAwareSampler]:
    sampler = StalenessAwareSampler(**kwargs)
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(len(versions)), sampler=sampler, batch_size=8
    )
    rb.extend(TensorDict(policy_version=torch.tensor(versions), batch_size=[len(versions)]))
    return rb, sampler


def test_frequencies_follow_inverse_staleness() -> None:
    rb, sampler = _rb([0.0, 3.0])
    sampler.consumer_version = 3  # staleness 3 and 0: weights 1/4 and 1
    sampler._rng = torch.Generator().manual_seed(0)
    index, info = sampler.sample(rb.storage, 20_000)
    share = (index == 1).float().mean().item()
    assert abs(share - 0.8) < 0.02  # 1 / (1 + 1/4)
    assert torch.equal(info["staleness"], torch.where(index == 1, 0.0, 3.0))


def test_hard_limit_and_errors() -> None:
    rb, sampler = _rb([0.0, 8.0], max_staleness=3)
    sampler.consumer_version = 10
    assert (rb.sample()["policy_version"] == 8.0).all()
    sampler.consumer_version = 100
    with pytest.raises(RuntimeError, match="max_staleness"):
        rb.sample()
    plain = TensorDictReplayBuffer(
        storage=LazyTensorStorage(2), sampler=StalenessAwareSampler(), batch_size=2
    )
    plain.extend(TensorDict(obs=torch.zeros(2), batch_size=[2]))
    with pytest.raises(KeyError, match="policy_version"):
        plain.sample()


def test_version_and_state() -> None:
    sampler = StalenessAwareSampler(max_staleness=7)
    sampler.increment_consumer_version()
    other = StalenessAwareSampler()
    other.load_state_dict(sampler.state_dict())
    assert (other.consumer_version, other.max_staleness) == (1, 7)
