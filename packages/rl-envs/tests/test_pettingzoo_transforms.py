"""RewardSum and StepCounter on PettingZoo's grouped keys (several groups, per-agent flags)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("pettingzoo")
pytest.importorskip("mpe2")

from rl_envs import RewardSum, StepCounter, TransformedEnv, check_env_specs
from rl_envs.libs.pettingzoo import PettingZooEnv


def _adversary(*transforms, max_cycles=25):
    env = PettingZooEnv("simple_adversary_v3", parallel=True, N=2, max_cycles=max_cycles, seed=0)
    return TransformedEnv(env, *transforms)


def test_reward_sum_sums_every_group():
    env = _adversary(RewardSum(), max_cycles=3)
    assert env.transform.in_keys == [("adversary", "reward"), ("agent", "reward")]
    check_env_specs(env)
    torch.manual_seed(0)
    td = env.rollout(7, break_when_any_done=False)
    done = td["next", "done"].squeeze(-1)
    assert torch.equal(done, torch.tensor([False, False, True, False, False, True, False]))
    for group, n in (("adversary", 1), ("agent", 2)):
        reward = td["next", group, "reward"]
        assert td["next", group, "episode_reward"].shape == (7, n, 1)
        acc, want = torch.zeros(n, 1), []
        for t in range(7):
            acc = acc + reward[t]
            want.append(acc)
            if done[t]:
                acc = torch.zeros(n, 1)
        torch.testing.assert_close(td["next", group, "episode_reward"], torch.stack(want))


def test_step_counter_truncates_groups_too():
    env = _adversary(StepCounter(max_steps=2))
    check_env_specs(env)
    td = env.rollout(4, break_when_any_done=False)
    assert torch.equal(td["next", "step_count"].squeeze(-1), torch.tensor([1, 2, 1, 2]))
    hit = torch.tensor([False, True, False, True])
    assert torch.equal(td["next", "truncated"].squeeze(-1), hit)
    assert torch.equal(td["next", "done"].squeeze(-1), hit)
    for group, n in (("adversary", 1), ("agent", 2)):
        for flag in ("truncated", "done"):
            got = td["next", group, flag].squeeze(-1)
            assert torch.equal(got, hit.unsqueeze(-1).expand(4, n)), (group, flag)
        assert not td["next", group, "terminated"].any()


def test_step_counter_without_update_done_leaves_group_done():
    env = _adversary(StepCounter(max_steps=1, update_done=False))
    td = env.rollout(1)
    assert td["next", "agent", "truncated"].all()
    assert not td["next", "agent", "done"].any()
