"""rl_trainers driving the real components: a DQN run on CartPole through the Trainer.

The trainer imports none of these packages; this test proves that the duck-typed
interfaces it relies on (collector, loss module, replay buffer, env rollout) are the
ones rl_collectors, rl_objectives, rl_buffers and rl_envs actually provide.
"""

from __future__ import annotations

import torch

from rl_buffers import LazyTensorStorage, TensorDictPrioritizedReplayBuffer
from rl_collectors import Collector
from rl_envs import Compose, DoubleToFloat, GymEnv, StepCounter, TransformedEnv
from rl_modules import MLP, EGreedyModule, QValueActor
from rl_objectives import DQNLoss, SoftUpdate
from rl_trainers import (
    CountFramesLog,
    CSVLogger,
    LogScalar,
    LogValidationReward,
    ReplayBufferTrainer,
    Trainer,
    UpdateWeights,
)


def _env(seed: int) -> TransformedEnv:
    env = TransformedEnv(GymEnv("CartPole-v1"), Compose(DoubleToFloat(), StepCounter()))
    env.set_seed(seed)
    return env


def _dqn_trainer(tmp_path, total_frames: int, save_file=None) -> tuple[Trainer, QValueActor]:
    torch.manual_seed(0)
    env = _env(0)
    actor = QValueActor(MLP(4, 2, num_cells=[32]), in_keys=["observation"], spec=env.action_spec)
    explore = torch.nn.Sequential(actor, EGreedyModule(env.action_spec, eps_init=0.5))
    collector = Collector(env, explore, frames_per_batch=64, total_frames=-1)
    loss = DQNLoss(actor, action_space=env.action_spec, delay_value=True, double_dqn=True)
    target = SoftUpdate(loss, eps=0.95)
    buffer = TensorDictPrioritizedReplayBuffer(
        alpha=0.7, beta=0.5, storage=LazyTensorStorage(2000), batch_size=32
    )
    trainer = Trainer(
        collector=collector,
        total_frames=total_frames,
        frame_skip=1,
        optim_steps_per_batch=4,
        loss_module=loss,
        optimizer=torch.optim.Adam(loss.parameters(), lr=1e-3),
        logger=CSVLogger("dqn", log_dir=str(tmp_path)),
        clip_norm=10.0,
        progress_bar=False,
        log_interval=0,
        save_trainer_file=save_file,
    )
    ReplayBufferTrainer(buffer, flatten_tensordicts=True).register(trainer)
    trainer.register_op("post_optim", target.step)
    UpdateWeights(collector, update_weights_interval=1).register(trainer)
    LogScalar(("next", "reward"), "r_training").register(trainer)
    CountFramesLog(frame_skip=1).register(trainer)
    LogValidationReward(
        record_interval=2, record_frames=100, policy_exploration=actor, environment=_env(1)
    ).register(trainer)
    return trainer, actor


def test_dqn_on_cartpole_through_the_trainer(tmp_path) -> None:
    trainer, _ = _dqn_trainer(tmp_path, total_frames=512, save_file=tmp_path / "dqn.pt")
    trainer.train()
    assert trainer.collected_frames == 512
    assert trainer._optim_count == 8 * 4
    assert len(trainer._modules["replay_buffer"].replay_buffer) == 512
    assert len(trainer._log_dict["r_evaluation"]) == 4  # batches 1, 3, 5, 7
    assert all(r == 1.0 for r in trainer._log_dict["r_evaluation"])  # CartPole pays 1 per step
    assert trainer._log_dict["total_r_evaluation"][-1] > 0
    rows = (tmp_path / "dqn" / "scalars" / "loss.csv").read_text().splitlines()
    assert len(rows) == 8
    assert all(torch.isfinite(torch.tensor(float(r.split(",")[1]))) for r in rows)
    assert (tmp_path / "dqn.pt").exists()


def test_dqn_checkpoint_restores_into_fresh_components(tmp_path) -> None:
    first, actor = _dqn_trainer(tmp_path / "a", total_frames=256, save_file=tmp_path / "dqn.pt")
    first.train()
    second, fresh_actor = _dqn_trainer(tmp_path / "b", total_frames=512)
    # the real collector and buffer store Python objects beyond tensors: trusted file
    second.load_from_file(tmp_path / "dqn.pt", weights_only=False)
    for a, b in zip(actor.parameters(), fresh_actor.parameters(), strict=True):
        assert torch.equal(a, b)
    assert len(second._modules["replay_buffer"].replay_buffer) == 256
    second.train()
    assert second.collected_frames == 512
    assert len(second._modules["replay_buffer"].replay_buffer) == 512
