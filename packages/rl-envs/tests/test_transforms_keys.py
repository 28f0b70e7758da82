import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    ExcludeTransform,
    PendulumEnv,
    RenameTransform,
    RewardSum,
    SelectTransform,
    TransformedEnv,
    check_env_specs,
)


def test_exclude():
    env = TransformedEnv(PendulumEnv(), RewardSum())
    env.append_transform(ExcludeTransform("episode_reward"))
    assert "episode_reward" not in env.observation_spec
    r = env.rollout(3)
    assert "episode_reward" not in r["next"]
    check_env_specs(env)


def test_select_keeps_reward_and_done():
    env = TransformedEnv(PendulumEnv(), RewardSum())
    env.append_transform(SelectTransform("observation"))
    assert list(env.observation_spec.keys()) == ["observation"]
    r = env.rollout(3)
    assert set(r["next"].keys()) == {"observation", "reward", "done", "terminated", "truncated"}
    check_env_specs(env)


def test_rename_both_ways():
    env = TransformedEnv(
        PendulumEnv(), RenameTransform(["observation"], ["obs"], ["action"], ["act"])
    )
    assert "obs" in env.observation_spec and "observation" not in env.observation_spec
    assert env.action_keys == ["act"]
    td = env.reset()
    td["act"] = torch.tensor([1.0])
    out = env.step(td)
    assert "obs" in out["next"] and "act" in out
    check_env_specs(env)


def test_rename_missing_key():
    with pytest.raises(KeyError, match="'a'"):
        RenameTransform(["a"], ["b"])(TensorDict(c=torch.zeros(1)))
    with pytest.raises(KeyError, match="'y'"):
        RenameTransform([], [], ["x"], ["y"]).inv(TensorDict(c=torch.zeros(1)))
