"""The native locomotion tasks against Gymnasium's MuJoCo v5 envs on the same states.

Both start from the same ``(qpos, qvel)`` (Gymnasium's ``set_state`` vs our
``reset(qpos=..., qvel=...)``: ``mj_resetData``, write, ``mj_forward``) and get the same
actions, some outside the control range. Tolerances: observations and termination
equal after casting Gymnasium's float64 to float32 (the physics runs the same C code on
the same model: expected bit-identical); rewards within ``rtol=atol=1e-5`` (Gymnasium
sums the control cost of the float32 action in float32, we in float64).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

pytest.importorskip("mujoco")
gymnasium = pytest.importorskip("gymnasium")

from rl_envs.mujoco import AntEnv, HalfCheetahEnv, HopperEnv, Walker2dEnv  # noqa: E402

CASES = [
    (HalfCheetahEnv, "HalfCheetah-v5", 40),
    (HopperEnv, "Hopper-v5", 80),
    (Walker2dEnv, "Walker2d-v5", 80),
    (AntEnv, "Ant-v5", 40),
]
N = 3


def _start_states(env, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    m = env.model
    qpos = m.qpos0 + gen.uniform(-0.1, 0.1, size=(N, m.nq))
    qvel = gen.normal(0.0, 0.5, size=(N, m.nv))
    if isinstance(env, AntEnv):
        qpos[2, 2] = 1.3  # torso too high: unhealthy, so termination is exercised
    return qpos, qvel


@pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")  # clipping on purpose
@pytest.mark.parametrize(("cls", "env_id", "steps"), CASES, ids=[c[1] for c in CASES])
def test_matches_gymnasium_v5_on_the_same_states(cls, env_id, steps):
    gen = np.random.default_rng(0)
    ours = cls(num_envs=N, num_threads=1)
    qpos, qvel = _start_states(ours, gen)
    td = ours.reset(qpos=torch.from_numpy(qpos), qvel=torch.from_numpy(qvel))
    refs = []
    for i in range(N):
        ref = gymnasium.make(env_id).unwrapped
        ref.reset(seed=i)
        ref.set_state(qpos[i], qvel[i])
        refs.append(ref)
        np.testing.assert_array_equal(
            td["observation"][i].numpy(), ref._get_obs().astype(np.float32)
        )
    alive = np.ones(N, dtype=bool)
    seen_terminal = 0
    for _ in range(steps):
        action = gen.uniform(-1.3, 1.3, size=(N, ours.model.nu)).astype(np.float32)
        out = ours.step(TensorDict(action=torch.from_numpy(action), batch_size=[N]))["next"]
        for i in np.flatnonzero(alive):
            obs, reward, terminated, truncated, _ = refs[i].step(action[i])
            np.testing.assert_array_equal(out["observation"][i].numpy(), obs.astype(np.float32))
            np.testing.assert_allclose(out["reward"][i, 0].item(), reward, rtol=1e-5, atol=1e-5)
            assert bool(out["terminated"][i, 0]) == terminated
            assert not bool(out["truncated"][i, 0]) and not truncated
            if terminated:
                alive[i] = False
                seen_terminal += 1
    if cls is not HalfCheetahEnv:
        assert seen_terminal >= 1, "the test should exercise termination"
    for ref in refs:
        ref.close()


def test_truncates_after_max_episode_steps():
    env = HalfCheetahEnv(num_envs=2, seed=0, max_episode_steps=4, num_threads=1)
    rollout = env.rollout(10)
    assert rollout.batch_size == torch.Size([2, 4])
    assert rollout["next", "truncated"][:, -1].all()
    assert not rollout["next", "terminated"].any()
    assert not rollout["next", "truncated"][:, :-1].any()


@pytest.mark.parametrize("cls", [HalfCheetahEnv, AntEnv])
def test_reset_noise_follows_gymnasium_distribution(cls):
    # 400 envs: ~4-6k noise samples (the std check is 4+ standard errors wide); 2000 Ant
    # datas committed ~10 GB and made every later fork in the test process fail (ENOMEM).
    env = cls(num_envs=400, seed=0, num_threads=1)
    env.reset()
    qpos = env._physics.read()["qpos"]
    qvel = env._physics.read()["qvel"]
    noise = qpos - env.model.qpos0
    assert np.abs(noise).max() <= 0.1 and np.abs(noise).max() > 0.099  # U(-0.1, 0.1)
    assert abs(qvel.std() - 0.1) < 0.005  # 0.1 * N(0, 1)
    env.close()
