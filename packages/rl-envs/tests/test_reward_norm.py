"""NormalizeReward: rewards over the running scale of the discounted return (SB3's VecNormalize)."""

import math

import pytest
import torch
from tensordict import TensorDict

from rl_envs import Compose, NormalizeReward, PendulumEnv, RewardSum, TransformedEnv


def reference_scaled_rewards(rewards, dones, gamma, clip=10.0, eps=1e-8):
    """Plain-Python closed form: reward / std of every discounted return seen so far."""
    n_envs = len(rewards[0])
    running = [0.0] * n_envs
    seen: list[float] = []
    out = []
    for r_t, d_t in zip(rewards, dones, strict=True):
        running = [g * gamma + r for g, r in zip(running, r_t, strict=True)]
        seen.extend(running)
        mean = sum(seen) / len(seen)
        var = sum((g - mean) ** 2 for g in seen) / len(seen)
        out.append([max(-clip, min(clip, r / math.sqrt(var + eps))) for r in r_t])
        running = [0.0 if d else g for g, d in zip(running, d_t, strict=True)]
    return out


def test_matches_the_variance_of_all_discounted_returns_seen():
    gen = torch.Generator().manual_seed(0)
    rewards = (torch.randn(12, 3, generator=gen) * 5 + 1).tolist()
    dones = [[t % 5 == 4, t % 3 == 2, False] for t in range(12)]
    t = NormalizeReward(gamma=0.9)
    got = []
    for r_t, d_t in zip(rewards, dones, strict=True):
        step = TensorDict(
            reward=torch.tensor(r_t).unsqueeze(-1),
            done=torch.tensor(d_t).unsqueeze(-1),
            batch_size=[3],
        )
        got.append(t._step(TensorDict(batch_size=[3]), step)["reward"].squeeze(-1).tolist())
    want = reference_scaled_rewards(rewards, dones, gamma=0.9)
    # the prior (count 1e-4, var 1) is the only difference from the closed form
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-3, atol=1e-4)


def test_clips_and_freezes():
    t = NormalizeReward(gamma=0.0, clip=1.5)

    def batch(r):
        done = torch.zeros(1, 1, dtype=torch.bool)
        return TensorDict(reward=torch.tensor([[r]]), done=done, batch_size=[1])

    t._step(TensorDict(batch_size=[1]), batch(1.0))
    t._step(TensorDict(batch_size=[1]), batch(-1.0))  # var of G over {1, -1} = 1
    assert t._step(TensorDict(batch_size=[1]), batch(100.0))["reward"].item() == 1.5
    t.freeze()
    scale = t.scale.clone()
    t._step(TensorDict(batch_size=[1]), batch(1000.0))
    assert torch.equal(t.scale, scale)


def test_in_an_env_keeps_raw_returns_before_it_and_restarts_returns_at_reset():
    env = TransformedEnv(
        PendulumEnv(batch_size=[2]),
        Compose(RewardSum(), NormalizeReward(gamma=0.99, out_keys=["scaled_reward"])),
    )
    env.set_seed(0)
    rollout = env.rollout(30)
    raw, scaled = rollout["next", "reward"], rollout["next", "scaled_reward"]
    per_step = raw.squeeze(-1).T.tolist()  # rollouts are [envs, time]
    want = reference_scaled_rewards(per_step, [[False, False]] * 30, gamma=0.99)
    torch.testing.assert_close(scaled.squeeze(-1).T, torch.tensor(want), rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(rollout["next", "episode_reward"][:, -1], raw.sum(1))
    normalizer = env.transform[-1]
    env.reset()
    assert all(torch.count_nonzero(g) == 0 for g in normalizer._returns.values())


def test_rejects_a_discount_out_of_range():
    with pytest.raises(ValueError, match="gamma must be in"):
        NormalizeReward(gamma=1.5)
