"""``MujocoEnv``: specs from the model, batching, frame_skip, seeding, partial resets,
exact state, threads, pixels (or a clean skip). References are raw ``mujoco`` loops."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

mujoco = pytest.importorskip("mujoco")

from rl_envs import check_env_specs  # noqa: E402
from rl_envs.mujoco import HalfCheetahEnv, MujocoEnv  # noqa: E402
from rl_envs.mujoco._render import rendering_available  # noqa: E402

ARM = """
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <camera name="front" pos="0 -2 0.5" xyaxes="1 0 0 0 0 1"/>
    <body name="link">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" size="0.05" fromto="0 0 0 0.5 0 0" mass="1"/>
      <body pos="0.5 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <geom type="capsule" size="0.04" fromto="0 0 0 0.4 0 0" mass="0.5"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="hinge" ctrlrange="-2 2" ctrllimited="true"/>
    <motor joint="elbow" ctrllimited="false" gear="1"/>
  </actuator>
</mujoco>
"""


class Arm(MujocoEnv):
    """A two-link arm: reward is the first joint's velocity; terminates past angle 1."""

    MODEL = ARM
    FRAME_SKIP = 3
    RESET_NOISE_SCALE = 0.05

    def _compute_reward(self, prev, action, sim):
        return sim["qvel"][:, 0] - 0.01 * np.square(action).sum(1)

    def _compute_terminated(self, sim):
        return np.abs(sim["qpos"][:, 0]) > 1.0


def _raw_steps(qpos, qvel, actions, frame_skip):
    """Reference: one MjData, mj_resetData + state + mj_forward, then mj_step per frame."""
    m = mujoco.MjModel.from_xml_string(ARM)
    d = mujoco.MjData(m)
    mujoco.mj_resetData(m, d)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    out = []
    for a in actions:
        d.ctrl[:] = a
        for _ in range(frame_skip):
            mujoco.mj_step(m, d)
        out.append(np.concatenate([d.qpos, d.qvel]))
    return np.stack(out)


@pytest.mark.parametrize("num_envs", [1, 4])
def test_check_env_specs(num_envs):
    check_env_specs(Arm(num_envs=num_envs, seed=0, num_threads=1))
    check_env_specs(HalfCheetahEnv(num_envs=num_envs, seed=0, num_threads=1))


def test_model_from_a_path_or_xml_path(tmp_path):
    path = tmp_path / "arm.xml"
    path.write_text(ARM)
    a, b = Arm(path, num_envs=2, seed=0), Arm(xml_path=str(path), num_envs=2, seed=0)
    assert a.model.nq == b.model.nq == 2
    assert torch.equal(a.reset()["observation"], b.reset()["observation"])
    m = mujoco.MjModel.from_xml_string(ARM)
    assert Arm(m).model is m


def test_specs_come_from_the_model():
    env = Arm(num_envs=3, seed=0)
    assert env.batch_size == torch.Size([3])
    spec = env.action_spec
    assert spec.shape == torch.Size([3, 2]) and spec.dtype == torch.float32
    # limited actuator: its ctrlrange; unlimited: [-1, 1] (TorchRL's choice)
    torch.testing.assert_close(spec.space.low[0], torch.tensor([-2.0, -1.0]))
    torch.testing.assert_close(spec.space.high[0], torch.tensor([2.0, 1.0]))
    assert env.observation_spec["observation"].shape == torch.Size([3, 4])
    assert env.reward_spec.shape == torch.Size([3, 1])
    assert env.dt == pytest.approx(0.03)
    env64 = Arm(num_envs=2, dtype=torch.float64)
    assert env64.rollout(2)["observation"].dtype == torch.float64


@pytest.mark.parametrize("num_threads", [1, 2])
def test_frame_skip_and_observation_match_a_raw_mujoco_loop(num_threads):
    n, steps = 3, 6
    env = Arm(num_envs=n, num_threads=num_threads)
    gen = np.random.default_rng(1)
    qpos, qvel = gen.uniform(-0.3, 0.3, (n, 2)), gen.uniform(-1, 1, (n, 2))
    actions = gen.uniform(-3, 3, (steps, n, 2)).astype(np.float32)  # beyond ctrlrange too
    env.reset(qpos=torch.from_numpy(qpos), qvel=torch.from_numpy(qvel))
    got = []
    with pytest.warns(UserWarning, match="outside its spec"):
        for a in actions:
            td = env.step(TensorDict(action=torch.from_numpy(a), batch_size=[n]))
            got.append(td["next", "observation"].double().numpy())
    got = np.stack(got, 1)
    for i in range(n):
        ref = _raw_steps(qpos[i], qvel[i], actions[:, i].astype(np.float64), frame_skip=3)
        np.testing.assert_array_equal(got[i], ref.astype(np.float32))


def test_reward_and_termination_use_the_task_hooks():
    env = Arm(num_envs=2, num_threads=1)
    qpos = torch.tensor([[0.0, 0.0], [0.99, 0.0]], dtype=torch.float64)
    qvel = torch.tensor([[0.0, 0.0], [5.0, 0.0]], dtype=torch.float64)
    env.reset(qpos=qpos, qvel=qvel)
    action = torch.tensor([[1.0, 0.5], [0.0, 0.0]])
    out = env.step(TensorDict(action=action, batch_size=[2]))["next"]
    ref = _raw_steps(qpos[0].numpy(), qvel[0].numpy(), [action[0].double().numpy()], 3)[-1]
    expected = ref[2] - 0.01 * (1.0 + 0.25)
    assert out["reward"][0, 0].item() == pytest.approx(expected, rel=1e-6)
    assert out["terminated"].squeeze(-1).tolist() == [False, True]
    assert out["done"].squeeze(-1).tolist() == [False, True]


def test_seeding_is_deterministic():
    def run(seed):
        env = HalfCheetahEnv(num_envs=3, num_threads=1)
        env.set_seed(seed)
        torch.manual_seed(0)
        return env.rollout(5)

    a, b, c = run(0), run(0), run(1)
    assert torch.equal(a["observation"], b["observation"])
    assert torch.equal(a["next", "reward"], b["next", "reward"])
    assert not torch.equal(a["observation"], c["observation"])
    # the constructor's seed is the same as set_seed
    env = HalfCheetahEnv(num_envs=3, seed=0, num_threads=1)
    assert torch.equal(env.reset()["observation"], a["observation"][:, 0])


def test_partial_reset_touches_only_masked_entries():
    env = Arm(num_envs=4, seed=0, num_threads=1)
    td = env.reset()
    for _ in range(3):
        td = env.rand_step(td)
        td = td["next"].exclude("reward")
    before = env._physics.get_state()["physics"].copy()
    mask = torch.tensor([[True], [False], [True], [False]])
    td.set("_reset", mask)
    out = env.reset(td)
    after = env._physics.get_state()["physics"]
    keep = [1, 3]
    np.testing.assert_array_equal(after[keep], before[keep])
    assert not np.array_equal(after[[0, 2]], before[[0, 2]])
    assert torch.equal(out["observation"][keep], td["observation"][keep])
    np.testing.assert_array_equal(
        out["observation"][[0, 2]].double().numpy(),
        np.concatenate([after[[0, 2], 1:3], after[[0, 2], 3:5]], 1).astype(np.float32),
    )
    assert env._t.tolist() == [0, 3, 0, 3]
    assert "_reset" not in set(out.keys())


def test_partial_reset_inside_rollout_restarts_terminated_entries():
    env = Arm(num_envs=3, seed=0, num_threads=1, max_episode_steps=5)
    r = env.rollout(12, break_when_any_done=False)
    assert r.batch_size == torch.Size([3, 12])
    assert r["next", "truncated"][:, 4].all()
    assert not r["done"][:, 5].any()  # the step after a done starts a fresh episode


@pytest.mark.parametrize("num_threads", [1, 2])
def test_get_state_set_state_is_bit_exact(assert_resume_is_exact, num_threads):
    assert_resume_is_exact(
        lambda: HalfCheetahEnv(num_envs=3, num_threads=num_threads), n_before=7, n_after=9
    )
    assert_resume_is_exact(lambda: Arm(num_envs=2, max_episode_steps=6), 4, 9)


def test_threads_do_not_change_results():
    def run(threads):
        env = HalfCheetahEnv(num_envs=5, seed=3, num_threads=threads)
        torch.manual_seed(0)
        return env.rollout(8)

    a, b = run(1), run(3)
    assert torch.equal(a["next", "observation"], b["next", "observation"])
    assert torch.equal(a["next", "reward"], b["next", "reward"])


def test_pixels_or_clean_skip():
    if not rendering_available():
        pytest.skip("no OpenGL context here (MUJOCO_GL=egl/osmesa unavailable)")
    env = Arm(num_envs=2, seed=0, from_pixels=True, render_width=32, render_height=24)
    td = env.rollout(2)
    assert td["pixels"].shape == torch.Size([2, 2, 24, 32, 3])
    assert td["pixels"].dtype == torch.uint8 and td["pixels"].float().std() > 0
    check_env_specs(env)
    only = Arm(num_envs=1, pixels_only=True, render_width=16, render_height=16)
    assert set(only.observation_spec.keys()) == {"pixels"}


def test_pixels_without_gl_raise_a_clear_error():
    if rendering_available():
        pytest.skip("OpenGL is available here")
    with pytest.raises(RuntimeError, match="MUJOCO_GL"):
        Arm(num_envs=1, from_pixels=True)
