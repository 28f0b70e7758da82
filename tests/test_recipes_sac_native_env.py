"""recipes/sac.py on a native env (``--env rl_envs:SatelliteEnv``) and its ``--obs-norm``."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType

import pytest
import torch

pytest.importorskip("mujoco")


def load_recipe(name: str) -> ModuleType:
    """The recipe ``recipes/<name>.py`` as a module (tests/conftest.py puts recipes/ on sys.path)."""
    return importlib.import_module(name)


def test_env_flag_builds_a_native_class_or_a_gymnasium_id() -> None:
    from rl_envs import GymEnv, SatelliteEnv

    sac = load_recipe("sac")
    native = sac.make_env(sac.Config(env="rl_envs:SatelliteEnv"))
    assert isinstance(native.base_env, SatelliteEnv)
    assert native.batch_size == torch.Size([1])
    assert native.observation_spec["observation"].shape == (1, 10)
    assert isinstance(sac.make_env(sac.Config(env="Pendulum-v1")).base_env, GymEnv)


def test_obs_norm_standardises_with_the_statistics_of_random_steps() -> None:
    sac = load_recipe("sac")
    cfg = sac.Config(env="rl_envs:SatelliteEnv", obs_norm=True, obs_norm_frames=300, seed=4)
    torch.manual_seed(0)
    mean, std = sac.observation_stats(cfg)
    assert mean.shape == std.shape == (10,)
    # wheel speeds (rad/s) vary far more than body rates (rad/s) under random torques
    assert (std[7:] > 20 * std[4:7]).all()

    # the same random steps through the normalised env: zero mean, unit std per entry
    env = sac.make_env(cfg, (mean, std))
    env.set_seed(cfg.seed + 20_000)
    torch.manual_seed(0)
    obs = env.rollout(300, break_when_any_done=False)["observation"].reshape(-1, 10)
    torch.testing.assert_close(obs.mean(0), torch.zeros(10), atol=1e-4, rtol=0)
    torch.testing.assert_close(obs.std(0), torch.ones(10), atol=1e-4, rtol=0)

    # and the map is (raw - mean) / std on the same state
    raw = sac.make_env(cfg)
    raw.set_seed(1)
    env.set_seed(1)
    expected = (raw.reset()["observation"] - mean) / std
    torch.testing.assert_close(env.reset()["observation"], expected)


def test_sac_runs_end_to_end_on_satellite_env_with_obs_norm(tmp_path: Path) -> None:
    sac = load_recipe("sac")
    args = ["--smoke", "--env", "rl_envs:SatelliteEnv", "--obs-norm", "--obs-norm-frames", "100",
            "--total-frames", "400", "--frames-per-batch", "200", "--init-random-frames", "200",
            "--utd-ratio", "0.01", "--hidden", "16", "--eval-every", "400",
            "--output-dir", str(tmp_path)]  # fmt: skip
    summary = sac.main(args)
    assert summary["frames"] == 400
    assert json.loads((tmp_path / "summary.json").read_text())["env"] == "rl_envs:SatelliteEnv"
    # one 200-step evaluation episode, rewards in [-pi - effort, 0]
    assert -200 * (torch.pi + 0.03) <= summary["final_eval_return"] < 0


def test_frame_skip_holds_each_action_and_keeps_the_episode_return() -> None:
    sac = load_recipe("sac")
    skipped = sac.make_env(sac.Config(env="rl_envs:SatelliteEnv", frame_skip=4))
    raw = sac.make_env(sac.Config(env="rl_envs:SatelliteEnv"))

    def push(td):
        return td.set("action", torch.full((1, 3), 0.5))

    skipped.set_seed(2)
    raw.set_seed(2)
    a = skipped.rollout(1000, push)  # stops at the 200-step truncation: 50 agent steps
    b = raw.rollout(1000, push)
    assert a.shape == (1, 50) and b.shape == (1, 200)
    torch.testing.assert_close(a["next", "reward"].sum(), b["next", "reward"].sum())
    torch.testing.assert_close(a["next", "observation"][:, -1], b["next", "observation"][:, -1])
    torch.testing.assert_close(
        a["next", "reward"][0, :, 0], b["next", "reward"][0, :, 0].reshape(50, 4).sum(1)
    )
