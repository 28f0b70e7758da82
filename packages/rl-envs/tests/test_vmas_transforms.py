"""RewardSum and StepCounter on VMAS's grouped keys (agent dim), against plain loops."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("vmas")

from rl_envs import RewardSum, StepCounter, TransformedEnv, check_env_specs
from rl_envs.libs.vmas import VmasEnv

B, N = 3, 3


def _env(*transforms, max_steps=3):
    return TransformedEnv(
        VmasEnv("navigation", num_envs=B, n_agents=N, seed=0, max_steps=max_steps), *transforms
    )


def _reference_sums(reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
    """Per-agent running sums along time (dim 1), restarting after each done."""
    out = torch.empty_like(reward)
    acc = torch.zeros_like(reward[:, 0])
    for t in range(reward.shape[1]):
        acc = acc + reward[:, t]
        out[:, t] = acc
        acc = torch.where(done[:, t].reshape(-1, 1, 1), torch.zeros_like(acc), acc)
    return out


def test_reward_sum_defaults_to_grouped_reward_keys():
    env = _env(RewardSum())
    t = env.transform
    assert t.in_keys == [("agents", "reward")]
    assert t.out_keys == [("agents", "episode_reward")]
    spec = env.full_observation_spec["agents", "episode_reward"]
    assert spec.shape == (B, N, 1)
    check_env_specs(env)


def test_reward_sum_matches_plain_loop_over_episodes():
    env = _env(RewardSum(in_keys=[("agents", "reward")]))
    torch.manual_seed(0)
    td = env.rollout(8, break_when_any_done=False)
    reward, done = td["next", "agents", "reward"], td["next", "done"]
    assert done[:, 2].all() and done[:, 5].all()  # two episode ends inside the rollout
    want = _reference_sums(reward, done)
    torch.testing.assert_close(td["next", "agents", "episode_reward"], want)
    # the root holds the sum before the step: zero at each episode start
    assert not td["agents", "episode_reward"][:, [0, 3, 6]].any()
    torch.testing.assert_close(
        td["agents", "episode_reward"][:, 1:], want[:, :-1] * ~done[:, :-1, None]
    )


def test_reward_sum_stepwise_equals_rollout():
    torch.manual_seed(1)
    actions = torch.rand(7, B, N, 2) * 2 - 1
    sums = []
    for stepwise in (False, True):
        env = _env(RewardSum())
        env.set_seed(0)
        if stepwise:
            root, steps = env.reset(), []
            for a in actions:
                root["agents", "action"] = a
                td, root = env.step_and_maybe_reset(root)
                steps.append(td["next", "agents", "episode_reward"])
            sums.append(torch.stack(steps, 1))
        else:
            it = iter(actions)

            def policy(td, it=it):
                td["agents", "action"] = next(it)
                return td

            out = env.rollout(7, policy, break_when_any_done=False)
            sums.append(out["next", "agents", "episode_reward"])
    torch.testing.assert_close(sums[0], sums[1])


def test_reward_sum_partial_reset_zeroes_only_reset_envs():
    env = _env(RewardSum(), max_steps=None)
    td = env.rollout(2)
    root = td[:, -1]["next"].exclude(("agents", "reward"))
    before = root["agents", "episode_reward"].clone()
    assert before.abs().sum() > 0
    root["_reset"] = torch.tensor([[True], [False], [True]])
    out = env.reset(root)
    assert not out["agents", "episode_reward"][[0, 2]].any()
    assert torch.equal(out["agents", "episode_reward"][1], before[1])


def test_step_counter_on_vmas():
    env = _env(StepCounter(max_steps=2), max_steps=None)
    check_env_specs(env)
    td = env.rollout(5, break_when_any_done=False)
    assert torch.equal(td["next", "step_count"][0].squeeze(-1), torch.tensor([1, 2, 1, 2, 1]))
    trunc = td["next", "truncated"].squeeze(-1)
    assert torch.equal(trunc[0], torch.tensor([False, True, False, True, False]))
    assert torch.equal(td["next", "done"], td["next", "truncated"])
    assert not td["next", "terminated"].any()
