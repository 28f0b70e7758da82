"""``CubeBowlEnv``, ``MacroActionEnv`` and the scripted macro policy.

The macro env is checked against a manual loop over a twin low-level env (summed
rewards, final observation, a done part-way); the scripted policy must solve most
episodes of the real task."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

pytest.importorskip("mujoco")

from rl_envs import Bounded, PendulumEnv, check_env_specs
from rl_envs.mujoco import (
    CubeBowlEnv,
    CubeBowlScriptedPolicy,
    MacroActionEnv,
    cube_bowl_macro_env,
)

pytestmark = pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")


def test_specs():
    env = CubeBowlEnv(num_envs=3, seed=0, num_threads=1)
    assert env.observation_spec["observation"].shape == torch.Size([3, 13])
    assert env.action_spec.shape == torch.Size([3, 4])
    check_env_specs(env)
    check_env_specs(cube_bowl_macro_env(CubeBowlEnv(num_envs=2, seed=0, num_threads=1)))


def test_macro_sums_rewards_and_returns_the_final_observation():
    macro = cube_bowl_macro_env(CubeBowlEnv(num_envs=2, seed=1, num_threads=1), 3, 2)
    twin = CubeBowlEnv(num_envs=2, seed=1, num_threads=1)
    root = macro.reset()
    ref_root = twin.reset()
    assert torch.equal(root["observation"], ref_root["observation"])
    target = torch.tensor([[0.1, 0.1, 0.3, 0.0], [-0.2, 0.0, 0.05, 1.0]])
    out = macro.step(root.set("action", target))["next"]
    # the reference: the same 5 low-level targets by hand
    start = ref_root["observation"][:, :3]
    total = torch.zeros(2, 1)
    for frac in (1 / 3, 2 / 3, 1.0, 1.0, 1.0):
        low = torch.cat([start + frac * (target[:, :3] - start), target[:, 3:]], -1)
        nxt = twin.step(TensorDict(action=low, batch_size=[2]))["next"]
        total += nxt["reward"]
    torch.testing.assert_close(out["reward"], total)
    assert torch.equal(out["observation"], nxt["observation"])


def test_macro_stops_accumulating_after_done():
    low = PendulumEnv(batch_size=[2], max_episode_steps=5)
    twin = PendulumEnv(batch_size=[2], max_episode_steps=5)
    macro = MacroActionEnv(
        low, lambda a, root: a.expand(4, *a.shape), Bounded(-2.0, 2.0, shape=(1,))
    )
    low.set_seed(0)
    twin.set_seed(0)
    td = macro.reset()
    twin.reset()
    action = torch.full((2, 1), 0.5)
    rewards, observations = [], []
    for _ in range(5):
        nxt = twin.step(TensorDict(action=action, batch_size=[2]))["next"]
        rewards.append(nxt["reward"])
        observations.append(nxt["observation"])
    first = macro.step(td.set("action", action))["next"]
    torch.testing.assert_close(first["reward"], sum(rewards[:4]))
    assert not first["done"].any()
    second = macro.step(TensorDict(observation=first["observation"], action=action, batch_size=[2]))
    second = second["next"]
    torch.testing.assert_close(second["reward"], rewards[4])  # only the step before done
    assert torch.equal(second["observation"], observations[4])
    assert second["truncated"].all() and second["done"].all()


def test_scripted_macro_policy_solves_most_episodes():
    env = cube_bowl_macro_env(CubeBowlEnv(num_envs=16, seed=0, num_threads=1))
    rollout = env.rollout(15, CubeBowlScriptedPolicy(), break_when_all_done=True)
    solved = rollout["next", "terminated"].any(1).squeeze(-1)
    assert solved.float().mean() >= 0.8, solved
    # success means the cube lies in the bowl, in the final observation of each solved env
    final = rollout["next", "observation"][..., 4:7]
    last = rollout["next", "terminated"].squeeze(-1).float().argmax(1)
    cube = final[torch.arange(16), last][solved].double().numpy()
    assert (np.linalg.norm(cube[:, :2] - [0.3, 0.0], axis=1) < 0.05).all()
    assert (cube[:, 2] < 0.04).all()


def test_random_low_level_actions_rarely_succeed():
    env = CubeBowlEnv(num_envs=8, seed=0, num_threads=1)
    rollout = env.rollout(40)
    assert not rollout["next", "terminated"].any()
