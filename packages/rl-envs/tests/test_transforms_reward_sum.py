import pytest
import torch
from tensordict import TensorDict

from rl_envs import PendulumEnv, RewardSum, StepCounter, TransformedEnv, check_env_specs


def test_running_return_resets_per_episode():
    env = TransformedEnv(PendulumEnv(batch_size=[2]), StepCounter(max_steps=3))
    env.append_transform(RewardSum())
    r = env.rollout(7, break_when_any_done=False)
    rewards = r["next", "reward"].squeeze(-1)
    expected = torch.zeros_like(rewards)
    for b in range(2):  # plain loop: reset the sum after each 3-step episode
        acc = 0.0
        for t in range(7):
            acc = acc + rewards[b, t]
            expected[b, t] = acc
            if (t + 1) % 3 == 0:
                acc = 0.0
    torch.testing.assert_close(r["next", "episode_reward"].squeeze(-1), expected)
    assert env.observation_spec["episode_reward"].shape == (2, 1)
    check_env_specs(env)


def test_reward_spec_option():
    env = TransformedEnv(PendulumEnv(), RewardSum(reward_spec=True))
    assert "episode_reward" in env.full_reward_spec
    assert "episode_reward" not in env.observation_spec


def test_missing_reward_key():
    with pytest.raises(KeyError, match="'reward'"):
        RewardSum()._step(TensorDict(), TensorDict(obs=torch.zeros(1)))
    with pytest.raises(KeyError, match="not in the env's reward spec"):
        TransformedEnv(PendulumEnv(), RewardSum(in_keys=["nope"]))


def test_key_count_mismatch_error():
    with pytest.raises(
        ValueError, match="RewardSum expects the same number of input and output keys"
    ):
        RewardSum(in_keys=["a", "b"], out_keys=["c"])


def test_offline_forward_is_a_cumulative_sum_over_the_time_dim():
    reward = torch.randn(2, 5, 1)
    td = TensorDict({("next", "reward"): reward}, batch_size=[2, 5], names=[None, "time"])
    t = RewardSum(in_keys=[("next", "reward")], out_keys=[("next", "episode_reward")])
    out = t(td)["next", "episode_reward"]
    expected = torch.stack([reward[:, : i + 1].sum(1) for i in range(5)], 1)
    torch.testing.assert_close(out, expected)


def test_offline_forward_errors():
    t = RewardSum(in_keys=["reward"], out_keys=["episode_reward"])
    with pytest.raises(ValueError, match="must be named 'time'"):
        t(TensorDict(reward=torch.zeros(3, 1), batch_size=[3]))
    with pytest.raises(KeyError, match="reward"):
        t(TensorDict(other=torch.zeros(3, 1), batch_size=[3], names=["time"]))


def test_offline_forward_matches_the_env_path():
    env = TransformedEnv(PendulumEnv(), RewardSum())
    data = env.rollout(6)
    t = RewardSum(in_keys=[("next", "reward")], out_keys=[("next", "episode_reward")])
    offline = t(data.exclude(("next", "episode_reward")))
    torch.testing.assert_close(offline["next", "episode_reward"], data["next", "episode_reward"])
