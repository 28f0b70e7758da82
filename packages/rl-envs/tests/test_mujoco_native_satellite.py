"""``SatelliteEnv``: specs, attitude error and reward in closed form, momentum exchange
with the wheels checked against MuJoCo's own angular momentum, exact state."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

mujoco = pytest.importorskip("mujoco")

from rl_envs import check_env_specs  # noqa: E402
from rl_envs.mujoco import SatelliteEnv  # noqa: E402


def _quat_z(angle: float) -> np.ndarray:
    return np.array([np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2)])


def test_specs_and_check_env_specs():
    env = SatelliteEnv(num_envs=3, seed=0, num_threads=1)
    assert env.observation_spec["observation"].shape == torch.Size([3, 10])
    assert env.action_spec.shape == torch.Size([3, 3])
    assert env.max_episode_steps == 200 and env.dt == pytest.approx(0.05)
    check_env_specs(env)
    check_env_specs(SatelliteEnv(num_envs=2, seed=0, random_target=True))


def test_error_quaternion_and_reward_in_closed_form():
    env = SatelliteEnv(num_envs=2, num_threads=1, effort_weight=0.5)
    qpos = np.tile(env.model.qpos0, (2, 1))
    qpos[0, 3:7] = _quat_z(0.8)
    qpos[1, 3:7] = -_quat_z(-0.3)  # same rotation as _quat_z(-0.3): the sign is normalized
    td = env.reset(qpos=torch.from_numpy(qpos), qvel=torch.zeros(2, env.model.nv))
    obs = td["observation"].double()
    np.testing.assert_allclose(obs[0, :4], _quat_z(0.8), atol=1e-7)
    np.testing.assert_allclose(obs[1, :4], _quat_z(-0.3), atol=1e-7)
    assert torch.equal(obs[:, 4:], torch.zeros(2, 6, dtype=torch.float64))
    out = env.step(TensorDict(action=torch.zeros(2, 3), batch_size=[2]))["next"]
    # at rest with no torque nothing moves: reward = -angle
    np.testing.assert_allclose(out["reward"].squeeze(-1), [-0.8, -0.3], atol=1e-6)
    env.reset(qpos=torch.from_numpy(qpos), qvel=torch.zeros(2, env.model.nv))
    action = torch.tensor([[0.0, 0.0, 1.0], [0.2, 0.2, 0.0]])
    out = env.step(TensorDict(action=action, batch_size=[2]))["next"]
    # the wheel turned the bus a little; recompute the angle from the bus quaternion
    q = env._physics.read()["qpos"][:, 3:7]
    angle = 2 * np.arccos(np.clip(np.abs(q[:, 0]), 0, 1))
    expected = -angle - 0.5 * (action.double() ** 2).sum(1).numpy()
    np.testing.assert_allclose(out["reward"].squeeze(-1).double(), expected, atol=1e-6)


def test_wheels_exchange_momentum_with_the_bus():
    env = SatelliteEnv(num_envs=1, num_threads=1, max_initial_angle=0.0, max_initial_rate=0.0)
    env.reset()
    for _ in range(20):
        td = env.step(TensorDict(action=torch.tensor([[0.0, 0.0, 1.0]]), batch_size=[1]))
    obs = td["next", "observation"][0].double()
    rate_z, wheel_z = obs[6].item(), obs[9].item()
    assert wheel_z > 1.0 and rate_z < 0.0  # the bus turns against the wheel
    # off-axis wheel masses couple the axes a little (products of inertia)
    assert obs[4:6].abs().max().item() < 0.01 * abs(rate_z)
    # total angular momentum stays zero: MuJoCo's subtree momentum of the bus
    d = env._physics.data(0)
    mujoco.mj_forward(env.model, d)
    mujoco.mj_subtreeVel(env.model, d)
    np.testing.assert_allclose(d.subtree_angmom[1], np.zeros(3), atol=1e-9)


def test_random_target_and_exact_resume(assert_resume_is_exact):
    env = SatelliteEnv(num_envs=3, seed=0, random_target=True, max_initial_angle=0.0)
    td = env.reset()
    target = env.target
    assert not np.allclose(target, [1.0, 0.0, 0.0, 0.0])
    # started at the target (max_initial_angle=0): zero error
    np.testing.assert_allclose(
        td["observation"][:, :4].double(), np.tile([1.0, 0, 0, 0], (3, 1)), atol=1e-6
    )
    assert_resume_is_exact(lambda: SatelliteEnv(num_envs=2, random_target=True), 5, 6)


def test_a_pd_controller_on_the_observation_points_the_satellite():
    """Sign conventions: wheel action = (kp * error vector + kd * body rate) / gear."""
    env = SatelliteEnv(num_envs=4, seed=3, num_threads=1, max_initial_angle=1.5)

    def pd(td):
        obs = td["observation"]
        return td.set("action", ((1.0 * obs[:, 1:4] + 2.0 * obs[:, 4:7]) / 0.1).clamp(-1, 1))

    rollout = env.rollout(200, pd)
    first_error = 2 * torch.acos(rollout["observation"][:, 0, 0].clamp(max=1.0))
    last_error = 2 * torch.acos(rollout["next", "observation"][:, -1, 0].clamp(max=1.0))
    assert (first_error > 0.3).all()
    assert (last_error < 0.1 * first_error).all()
