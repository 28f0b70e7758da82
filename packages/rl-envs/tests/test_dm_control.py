"""DMControlEnv: cheetah-run specs, pixels, seeding, flags."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("MUJOCO_GL", "egl")  # headless rendering (see the README)
pytest.importorskip("dm_control")

from rl_envs import DMControlEnv, check_env_specs


def test_cheetah_run_specs_and_time_limit():
    env = DMControlEnv("cheetah", "run")
    env.set_seed(0)
    check_env_specs(env)
    assert env.action_spec.shape == (6,)
    assert set(env.observation_spec.keys()) == {"position", "velocity"}
    r = env.rollout(1000)
    assert r.batch_size == (1000,)
    assert r["next", "truncated"][-1].item() and not r["next", "terminated"].any()


def test_seeding_determinism():
    env = DMControlEnv("cheetah", "run")
    runs = []
    for _ in range(2):
        env.set_seed(4)
        torch.manual_seed(4)
        runs.append(env.rollout(20))
    assert (runs[0] == runs[1]).all()


def test_pixels():
    env = DMControlEnv(
        "cheetah", "run", from_pixels=True, render_kwargs={"height": 32, "width": 48}
    )
    check_env_specs(env)
    r = env.rollout(2)
    assert r["next", "pixels"].shape == (2, 32, 48, 3)
    assert r["next", "pixels"].dtype == torch.uint8
    assert r["next", "pixels"].float().std() > 0


@pytest.mark.parametrize(
    ("domain", "task", "time_limit"),
    [("cheetah", "run", 0.3), ("finger", "spin", 0.6)],  # 30 steps; finger-spin edits its model
)
def test_get_set_state_resume_is_bit_identical(domain, task, time_limit, assert_resume_is_exact):
    def make():
        return DMControlEnv(domain, task, task_kwargs={"time_limit": time_limit})

    ref = assert_resume_is_exact(make, 25, 10)
    assert ref["next", "truncated"].any()  # the continuation crosses an episode boundary


def test_set_state_other_task_raises():
    state = DMControlEnv("cheetah", "run").get_state()
    with pytest.raises(ValueError, match="same domain"):
        DMControlEnv("finger", "spin").set_state(state)
