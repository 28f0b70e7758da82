"""Parameter schedulers (TorchRL's LinearScheduler family) on a prioritized sampler."""

from __future__ import annotations

import pytest
import torch

from rl_buffers import (
    LambdaScheduler,
    LazyTensorStorage,
    LinearScheduler,
    PrioritizedSampler,
    RandomSampler,
    ReplayBuffer,
    SchedulerList,
    StepScheduler,
)


def test_linear_scheduler_ramps_then_holds_and_drives_the_weights() -> None:
    sampler = PrioritizedSampler(8, alpha=1.0, beta=0.0)
    rb = ReplayBuffer(storage=LazyTensorStorage(8), sampler=sampler, batch_size=8)
    rb.extend(torch.arange(8.0))
    rb.update_priority(torch.arange(8), torch.arange(1.0, 9.0))
    scheduler = LinearScheduler(rb, param_name="beta", final_value=1.0, num_steps=4)
    seen = []
    for _ in range(6):
        scheduler.step()
        seen.append(sampler.beta)
    assert seen == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 1.0])
    _, info = rb.sample(return_info=True)
    p = torch.arange(1.0, 9.0)[info["index"]]
    assert torch.allclose(info["priority_weight"], (p / 1.0) ** -1.0)  # (p_i / p_min) ** -beta


def test_step_lambda_and_list() -> None:
    sampler = PrioritizedSampler(4, alpha=0.5, beta=0.4)
    additive = StepScheduler(sampler, "beta", gamma=0.25, n_steps=2, mode="additive", max_value=1.0)
    multiplicative = StepScheduler(sampler, "alpha", gamma=0.5, min_value=0.2)
    schedulers = SchedulerList([additive, multiplicative])
    betas, alphas = [], []
    for _ in range(6):
        schedulers.step()
        betas.append(sampler.beta)
        alphas.append(sampler.alpha)
    assert betas == pytest.approx([0.4, 0.65, 0.65, 0.9, 0.9, 1.0])
    assert alphas == pytest.approx([0.25, 0.2, 0.2, 0.2, 0.2, 0.2])
    lam = LambdaScheduler(sampler, "beta", lambda step: 0.5**step)
    lam.step()
    assert sampler.beta == pytest.approx(0.5)  # 1.0 (initial) * 0.5
    state = lam.state_dict()
    lam.step()
    lam.load_state_dict(state)
    lam.step()
    assert sampler.beta == pytest.approx(0.25)


def test_errors_name_what_is_wrong() -> None:
    with pytest.raises(TypeError, match="ReplayBuffer or a Sampler"):
        LinearScheduler(object(), "beta", 1.0, 3)
    with pytest.raises(ValueError, match="no attribute 'beta'"):
        LinearScheduler(RandomSampler(), "beta", 1.0, 3)
    with pytest.raises(ValueError, match="mode"):
        StepScheduler(PrioritizedSampler(4, 0.5, 0.5), "beta", mode="exp")
