"""DiffusionActor / DDPMSampler: the DDPM reverse chain against a plain recursion."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from rl_modules import DDPMSampler, DiffusionActor, ExplorationType, set_exploration_type


class ConstantNoise(nn.Module):
    """Predicts the same noise ``c`` everywhere and records the time inputs it saw."""

    def __init__(self, c: float, action_dim: int) -> None:
        super().__init__()
        self.c, self.action_dim, self.times = c, action_dim, []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.times.append(float(x[..., -1].reshape(-1)[0]))
        return torch.full((*x.shape[:-1], self.action_dim), self.c, dtype=x.dtype)


def test_deterministic_chain_matches_closed_form_recursion():
    T, beta0, beta1, c = 4, 1e-3, 0.2, 0.3
    net = ConstantNoise(c, 2)
    actor = DiffusionActor(2, score_network=net, num_steps=T, beta_start=beta0, beta_end=beta1)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        out = actor(TensorDict(observation=torch.zeros(3, 5, dtype=torch.float64), batch_size=[3]))
    x, abar = 0.0, 1.0
    betas = [beta0 + (beta1 - beta0) * i / (T - 1) for i in range(T)]
    abars = []
    for b in betas:
        abar *= 1 - b
        abars.append(abar)
    for t in reversed(range(T)):
        x = (x - betas[t] / (1 - abars[t]) ** 0.5 * c) / (1 - betas[t]) ** 0.5
    torch.testing.assert_close(out["action"], torch.full((3, 2), x, dtype=torch.float64))
    assert net.times == [3.0, 2.0, 1.0, 0.0]


def test_random_mode_samples_and_deterministic_mode_repeats():
    actor = DiffusionActor(action_dim=2, obs_dim=3, num_steps=3)
    td = TensorDict(observation=torch.randn(4, 3), batch_size=[4])
    a, b = actor(td.clone())["action"], actor(td.clone())["action"]
    assert not torch.equal(a, b)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        c, d = actor(td.clone())["action"], actor(td.clone())["action"]
    torch.testing.assert_close(c, d)


def test_keys_shapes_and_unbatched():
    actor = DiffusionActor(2, obs_dim=3, num_steps=2, in_keys=["obs"], out_keys=["act"])
    assert actor.in_keys == ["obs"] and actor.out_keys == ["act"]
    assert actor(TensorDict(obs=torch.randn(3), batch_size=[]))["act"].shape == (2,)
    lazy = DiffusionActor(2, num_steps=2)  # obs_dim inferred on the first call
    assert lazy(TensorDict(observation=torch.randn(5, 7), batch_size=[5]))["action"].shape == (5, 2)


def test_gradients_reach_every_parameter():
    actor = DiffusionActor(action_dim=2, obs_dim=3, num_steps=3)
    actor(TensorDict(observation=torch.randn(4, 3), batch_size=[4]))["action"].sum().backward()
    assert all(p.grad is not None for p in actor.parameters())


def test_add_noise_is_the_forward_process():
    sampler = DDPMSampler(nn.Linear(6, 2), action_dim=2, num_steps=10)
    clean = torch.randn(8, 2)
    t = torch.arange(8)
    noisy, noise = sampler.add_noise(clean, t)
    betas = torch.linspace(1e-4, 0.02, 10, dtype=torch.float64)
    abar = torch.cumprod(1 - betas, 0)[t].float().unsqueeze(-1)
    torch.testing.assert_close(noisy, abar.sqrt() * clean + (1 - abar).sqrt() * noise)


def test_safe_projects_into_spec_and_bad_schedule_raises():
    class Box:
        def project(self, v):
            return v.clamp(-0.01, 0.01)

    actor = DiffusionActor(2, obs_dim=3, num_steps=2, spec=Box(), safe=True)
    assert actor.spec is not None
    out = actor(TensorDict(observation=torch.randn(4, 3), batch_size=[4]))["action"]
    assert out.abs().max() <= 0.01
    with pytest.raises(ValueError, match="beta_start"):
        DiffusionActor(2, obs_dim=3, beta_start=0.5, beta_end=0.1)
