"""The recipes' shared plumbing: config flags, RNG-exact checkpoints, logs and plots."""

from __future__ import annotations

import csv
import importlib.util
import math
import random
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("_common", ROOT / "recipes" / "_common.py")
common = importlib.util.module_from_spec(_spec)
sys.modules["_common"] = common  # dataclasses resolve field types through sys.modules
_spec.loader.exec_module(common)


@dataclass
class ToyConfig:
    """A toy recipe."""

    env: str = "CartPole-v1"
    """Gymnasium id."""
    total_frames: int = 1000
    """Frames to collect
    in total."""
    lr: float = 3e-4
    """Learning rate."""
    anneal: bool = True
    """Anneal the learning rate."""
    smoke: bool = False
    resume: str = ""

    SMOKE: ClassVar[dict[str, object]] = {"total_frames": 10}


def test_field_docs_reads_the_docstring_under_each_field() -> None:
    docs = common.field_docs(ToyConfig)
    assert docs["env"] == "Gymnasium id."
    assert docs["total_frames"] == "Frames to collect in total."
    assert "smoke" not in docs


def test_parse_config_flags_types_and_smoke_overrides() -> None:
    cfg = common.parse_config(ToyConfig, ["--lr", "0.1", "--anneal", "false", "--env", "X"])
    assert (cfg.lr, cfg.anneal, cfg.env, cfg.total_frames) == (0.1, False, "X", 1000)
    assert common.parse_config(ToyConfig, ["--smoke", "true"]).total_frames == 10
    explicit = common.parse_config(ToyConfig, ["--smoke", "1", "--total-frames", "7"])
    assert explicit.total_frames == 7
    with pytest.raises(SystemExit):
        common.parse_config(ToyConfig, ["--anneal", "maybe"])


def test_presets_apply_before_smoke_and_explicit_flags() -> None:
    @dataclass
    class WithPresets(ToyConfig):
        preset: str = ""
        PRESETS: ClassVar[dict[str, dict[str, object]]] = {
            "fast": {"lr": 0.5, "total_frames": 99, "env": "Y"}
        }

    cfg = common.parse_config(WithPresets, ["--preset", "fast"])
    assert (cfg.lr, cfg.total_frames, cfg.env) == (0.5, 99, "Y")
    cfg = common.parse_config(WithPresets, ["--preset", "fast", "--smoke", "--lr", "0.25"])
    assert (cfg.lr, cfg.total_frames, cfg.env) == (0.25, 10, "Y")
    with pytest.raises(SystemExit):
        common.parse_config(WithPresets, ["--preset", "slow"])


@pytest.mark.parametrize(
    ("argv", "smoke", "anneal", "frames"),
    [
        (["--smoke"], True, True, 10),
        (["--smoke", "--output-dir", "x"], True, True, 10),
        (["--anneal", "--smoke", "false"], False, True, 1000),
        (["--smoke", "--total-frames", "7", "--anneal", "no"], True, False, 7),
    ],
)
def test_bare_boolean_flags_mean_true(
    argv: list[str], smoke: bool, anneal: bool, frames: int
) -> None:
    @dataclass
    class WithDir(ToyConfig):
        output_dir: str = ""
        """Folder."""

    cfg = common.parse_config(WithDir, argv)
    assert (cfg.smoke, cfg.anneal, cfg.total_frames) == (smoke, anneal, frames)


def test_help_lists_every_field_with_its_doc(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        common.parse_config(ToyConfig, ["--help"])
    out = capsys.readouterr().out
    assert "--total-frames" in out and "Frames to collect in total." in out
    assert "(default: None)" not in out, "each flag shows its field's default, once"


def test_checkpoint_round_trip_restores_every_rng(tmp_path: Path) -> None:
    common.seed_everything(3)
    path = tmp_path / "ckpt" / "last.pt"
    common.save_checkpoint(path, {"frames": 5})
    expected = (random.random(), np.random.rand(), torch.rand(()).item())
    random.random(), np.random.rand(), torch.rand(())  # move every generator on
    state = common.load_checkpoint(path)
    assert state["frames"] == 5
    assert (random.random(), np.random.rand(), torch.rand(()).item()) == expected
    assert not path.with_suffix(".pt.tmp").exists()
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        common.load_checkpoint(tmp_path / "missing.pt")


def test_logger_writes_csv_and_the_plot_reads_it(tmp_path: Path) -> None:
    logger = common.RunLogger(tmp_path, total_frames=100)
    logger.log(10, **{"train/return": 1.0, "loss": 0.5})
    logger.log(20, **{"train/return": 3.0})
    logger.advance(20)
    logger.close()
    rows = list(csv.reader((tmp_path / "metrics.csv").read_text().splitlines()))
    assert rows == [
        ["frames", "name", "value"],
        ["10", "train/return", "1.0"],
        ["10", "loss", "0.5"],
        ["20", "train/return", "3.0"],
    ]
    common.plot_learning_curve(tmp_path / "metrics.csv", tmp_path / "curve.png", "toy")
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    line = common.write_summary(tmp_path, frames=20, final_eval_return=3.0)
    assert (tmp_path / "summary.json").read_text().strip() == line


def test_buffer_state_round_trip_keeps_contents_cursor_and_priorities() -> None:
    from tensordict import TensorDict

    from rl_buffers import LazyTensorStorage, TensorDictPrioritizedReplayBuffer

    def make() -> TensorDictPrioritizedReplayBuffer:
        return TensorDictPrioritizedReplayBuffer(
            alpha=0.6, beta=0.4, storage=LazyTensorStorage(8), batch_size=4, backend="torch"
        )

    rb = make()
    rb.extend(TensorDict(obs=torch.arange(10.0), batch_size=[10]))  # wraps: cursor at 2
    rb.update_priority(torch.arange(8), torch.arange(1.0, 9.0))
    restored = make()
    common.load_buffer_state_dict(restored, common.buffer_state_dict(rb))
    assert torch.equal(restored[torch.arange(8)]["obs"], rb[torch.arange(8)]["obs"])
    torch.manual_seed(0)
    expected = rb.sample()["index"]
    torch.manual_seed(0)
    assert torch.equal(restored.sample()["index"], expected)
    one = TensorDict(obs=torch.tensor([-1.0]), batch_size=[1])
    assert rb.extend(one.clone()).tolist() == restored.extend(one.clone()).tolist() == [2]


class _CountingEnv:
    """Episodes of ``length`` steps with reward 1; ``set_seed`` is recorded."""

    def __init__(self, length: int) -> None:
        self.length, self.seeds = length, []

    def set_seed(self, seed: int) -> None:
        self.seeds.append(seed)

    def rollout(self, max_steps: int, policy: object, break_when_any_done: bool) -> object:
        from tensordict import TensorDict

        from rl_modules import ExplorationType, exploration_type

        assert exploration_type() == ExplorationType.DETERMINISTIC and break_when_any_done
        steps = min(self.length, max_steps)
        return TensorDict({("next", "reward"): torch.ones(steps, 1)}, batch_size=[steps])


def test_evaluate_reseeds_and_runs_deterministic_episodes() -> None:
    env = _CountingEnv(length=7)
    assert common.evaluate(env, policy=None, episodes=3, seed=11) == 7.0
    assert env.seeds == [11]


@dataclass
class ToyRunConfig(common.RunConfig):
    """A toy recipe on the shared base."""

    lr: float = 1e-3
    """Learning rate."""
    output_dir: str = "runs/toy"
    checkpoint_every: int = 7
    """Frames between checkpoints of the toy."""


def test_field_docs_reads_base_classes_and_lets_a_subclass_redocument() -> None:
    docs = common.field_docs(ToyRunConfig)
    assert docs["lr"] == "Learning rate."
    assert docs["seed"] == "Seed of every RNG and of the envs."
    # restating a field with a new default keeps the base doc unless a new one is written
    assert docs["output_dir"].startswith("Folder for logs")
    assert docs["checkpoint_every"] == "Frames between checkpoints of the toy."
    cfg = common.parse_config(ToyRunConfig, ["--seed", "3"])
    assert (cfg.seed, cfg.output_dir, cfg.checkpoint_every, cfg.lr) == (3, "runs/toy", 7, 1e-3)


def test_finish_run_closes_plots_and_writes_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    class ToyCollector:
        shut = False

        def shutdown(self) -> None:
            self.shut = True

    collector = ToyCollector()
    logger = common.RunLogger(tmp_path, total_frames=10)
    logger.log(10, **{"eval/return": 2.0})
    summary = common.finish_run(
        collector, logger, common.Stopwatch(), tmp_path,
        algo="toy", env="E", frames=10, eval_return=2.0,
    )  # fmt: skip
    assert collector.shut
    assert summary["algo"] == "toy" and summary["frames"] == 10
    assert summary["final_eval_return"] == 2.0
    assert (tmp_path / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert printed == (tmp_path / "summary.json").read_text().strip()


def test_counters_state_round_trips_through_run_counters() -> None:
    cfg = common.RunConfig(eval_every=10, checkpoint_every=20)
    fresh = common.run_counters(cfg)
    assert (fresh.frames, fresh.wall, fresh.next_eval, fresh.next_ckpt) == (0, 0.0, 10, 20)
    assert math.isnan(fresh.eval_return)
    saved = common.counters_state(
        cfg, frames=30, wall=1.5, eval_return=4.0, next_eval=40, next_ckpt=40
    )
    assert saved["config"]["checkpoint_every"] == 20
    resumed = common.run_counters(cfg, saved)
    assert resumed == common.RunCounters(
        frames=30, wall=1.5, eval_return=4.0, next_eval=40, next_ckpt=40
    )
    frames, wall, eval_return, next_eval, next_ckpt = resumed  # the older tuple unpacking
    assert (frames, wall, eval_return, next_eval, next_ckpt) == (30, 1.5, 4.0, 40, 40)


def test_attr_state_checkpoints_plain_attributes() -> None:
    from types import SimpleNamespace

    counter = SimpleNamespace(updates=3, other=1)
    state = common.AttrState(counter, "updates")
    saved = state.state_dict()
    counter.updates = 99
    state.load_state_dict(saved)
    assert counter.updates == 3 and saved == {"updates": 3}
    with pytest.raises(AttributeError, match=r"no attribute\(s\) \['missing'\]"):
        common.AttrState(counter, "missing")


def test_scalar_means_average_the_scalar_entries_of_each_minibatch() -> None:
    from tensordict import TensorDict

    means = common.ScalarMeans()
    for kl, clip in ((0.1, 0.0), (0.2, 0.5), (0.6, 0.1)):
        out = TensorDict(
            {
                "kl_approx": torch.tensor(kl),
                "clip_fraction": torch.tensor(clip),
                "per_sample": torch.ones(3),  # not a scalar: not logged
            }
        )
        means.add(out)
    got = means.pop()
    assert got.keys() == {"kl_approx", "clip_fraction"}
    assert got["kl_approx"] == pytest.approx(0.3) and got["clip_fraction"] == pytest.approx(0.2)
    assert means.pop() == {}


def test_log_episodes_logs_the_mean_return_of_finished_episodes_only(tmp_path: Path) -> None:
    from tensordict import TensorDict

    def batch(done: list[bool]) -> TensorDict:
        reward = torch.tensor([[1.0], [2.0], [6.0]])
        nxt = {"done": torch.tensor(done).unsqueeze(-1), "episode_reward": reward}
        return TensorDict({"next": nxt}, batch_size=[3])

    logger = common.RunLogger(tmp_path, total_frames=6)
    logger.log_episodes(3, batch([False, False, False]))
    logger.log_episodes(6, batch([True, False, True]))
    logger.close()
    with (tmp_path / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert rows == [{"frames": "6", "name": "train/return", "value": "3.5"}]


def test_action_clip_clips_what_the_env_gets_and_keeps_the_policy_sample() -> None:
    from rl_envs import Bounded, PendulumEnv, TransformedEnv, Unbounded

    # clip at +-1 (inside Pendulum's own +-2, so the env's clipping cannot hide ours)
    filters = list(warnings.filters)
    env = TransformedEnv(PendulumEnv(), common.action_clip(Bounded(-1.0, 1.0, shape=(1,))))
    assert warnings.filters == filters  # no process-wide warning filter
    assert isinstance(env.action_spec, Unbounded)  # outside: any action is in spec
    reference = PendulumEnv()
    env.set_seed(3)
    reference.set_seed(3)
    td, ref = env.reset(), reference.reset()
    torch.testing.assert_close(td["observation"], ref["observation"])
    td["action"], ref["action"] = torch.tensor([1.7]), torch.tensor([1.0])
    out = env.step(td)
    assert out["action"].item() == pytest.approx(1.7)  # the stored sample is the policy's own
    # the env stepped with the clipped action: same next state and reward as with 1.0
    expected = reference.step(ref)
    torch.testing.assert_close(out["next", "observation"], expected["next", "observation"])
    torch.testing.assert_close(out["next", "reward"], expected["next", "reward"])


def test_action_clip_refuses_bounds_that_differ_across_dimensions() -> None:
    from rl_envs import Bounded

    spec = Bounded(torch.tensor([-1.0, -2.0]), torch.tensor([1.0, 2.0]), shape=(2,))
    with pytest.raises(ValueError, match="same bounds in every action dimension"):
        common.action_clip(spec)


def test_normalized_env_scales_training_rewards_only_and_clips_continuous_actions() -> None:
    from rl_envs import GymEnv, PendulumEnv, VecNorm

    def names(env: object) -> list[str]:
        return [type(t).__name__ for t in env.transform]

    vecnorm = VecNorm(in_keys=["observation"])
    train = common.normalized_env(PendulumEnv(), vecnorm, obs_clip=5.0, reward_gamma=0.9,
                                  clip_actions=True)  # fmt: skip
    assert names(train) == ["VecNorm", "ClipTransform", "DoubleToFloat", "StepCounter",
                            "RewardSum", "NormalizeReward", "ClipIntoBounds"]  # fmt: skip
    held_out = common.normalized_env(PendulumEnv(), None)
    assert names(held_out) == ["DoubleToFloat", "StepCounter", "RewardSum"]
    discrete = GymEnv("CartPole-v1", categorical_action_encoding=True)
    assert "ClipTransform" not in names(common.normalized_env(discrete, None, clip_actions=True))
    # training rewards are scaled, the logged episode return is not
    train.set_seed(0)
    rollout = train.rollout(20)
    assert rollout["next", "observation"].abs().max() <= 5.0
    assert not torch.allclose(
        rollout["next", "reward"].cumsum(0)[-1], rollout["next", "episode_reward"][-1]
    )


def test_copy_frozen_stats_holds_the_training_statistics_fixed() -> None:
    from tensordict import TensorDict

    from rl_envs import VecNorm

    train, held = VecNorm(in_keys=["observation"]), VecNorm(in_keys=["observation"])
    for value in (1.0, 3.0, 8.0):
        train._call(TensorDict(observation=torch.full((2,), value)))
    common.copy_frozen_stats(train, held)
    probe = TensorDict(observation=torch.full((2,), 2.0))
    assert held.frozen
    before = held._call(probe.clone())["observation"]
    held._call(TensorDict(observation=torch.full((2,), 100.0)))  # frozen: no update
    torch.testing.assert_close(held._call(probe.clone())["observation"], before)
    train.frozen = True
    torch.testing.assert_close(train._call(probe.clone())["observation"], before)
    common.copy_frozen_stats(None, held)  # no normalisation: nothing to copy


@pytest.mark.parametrize("tanh_squash", [True, False])
def test_stochastic_actor_heads(tanh_squash: bool) -> None:
    from tensordict import TensorDict

    from rl_envs import Bounded, Categorical
    from rl_modules import IndependentNormal, TanhNormal

    spec = Bounded(-1.0, 1.0, shape=(2,))
    actor = common.stochastic_actor(torch.nn.Linear(3, 2), spec, tanh_squash=tanh_squash,
                                    log_std_init=-1.0)  # fmt: skip
    td = actor(TensorDict(observation=torch.zeros(3)))
    torch.testing.assert_close(td["scale"], torch.full((2,), math.exp(-1.0)))
    dist = actor.get_dist(td)
    assert isinstance(dist, TanhNormal if tanh_squash else IndependentNormal)
    torch.testing.assert_close(td["action_log_prob"], dist.log_prob(td["action"]))
    discrete = common.stochastic_actor(torch.nn.Linear(3, 4), Categorical(4))
    out = discrete(TensorDict(observation=torch.zeros(3)))
    assert out["action"].dtype == torch.int64 and out["action"].shape == ()
    assert out["logits"].shape == (4,)
