"""ReplayBuffer(generator=...) / set_rng: every sampler draws from the given generator."""

from __future__ import annotations

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
    SliceSampler,
    SliceSamplerWithoutReplacement,
)


def _data() -> TensorDict:
    episode = torch.arange(40) // 8
    return TensorDict(obs=torch.arange(40.0), episode=episode, batch_size=[40])


SAMPLERS = {
    "random": lambda: RandomSampler(),
    "without-replacement": lambda: SamplerWithoutReplacement(),
    "prioritized": lambda: PrioritizedSampler(40, alpha=0.7, beta=0.5),
    "slice": lambda: SliceSampler(num_slices=2, traj_key="episode"),
    "slice-without-replacement": lambda: SliceSamplerWithoutReplacement(
        num_slices=2, traj_key="episode"
    ),
}


def _samples(make_sampler, seed: int) -> list[torch.Tensor]:
    rb = ReplayBuffer(
        storage=LazyTensorStorage(40),
        sampler=make_sampler(),
        batch_size=8,
        generator=torch.Generator().manual_seed(seed),
    )
    rb.extend(_data())
    return [rb.sample()["obs"] for _ in range(3)]


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_same_seed_same_samples_and_global_rng_untouched(name: str) -> None:
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = _samples(SAMPLERS[name], seed=0)
    assert torch.equal(torch.get_rng_state(), state), "the global generator must not be drawn"
    second = _samples(SAMPLERS[name], seed=0)
    other = _samples(SAMPLERS[name], seed=1)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(first, other, strict=True))


def test_set_rng_replays_the_draws_and_generator_property() -> None:
    gen = torch.Generator().manual_seed(7)
    rb = ReplayBuffer(storage=ListStorage(10), generator=gen)
    assert rb.generator is gen and rb.sampler._rng is gen and rb.storage._rng is gen
    rb.extend(list(range(10)))
    first = rb.sample(6)
    rb.set_rng(torch.Generator().manual_seed(7))
    assert rb.sample(6) == first
    # The draws are torch.randint's on that generator (an independent reference).
    expected = torch.randint(10, (6,), generator=torch.Generator().manual_seed(7)).tolist()
    assert first == expected
