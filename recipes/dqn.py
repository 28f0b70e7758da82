"""DQN (Mnih et al., 2015, Nature 518) with double Q-learning (van Hasselt et al., 2016),
hard target updates, linearly annealed epsilon-greedy exploration and optional prioritized
replay (Schaul et al., 2016, arXiv:1511.05952).

Defaults follow the tuned CartPole-v1 setting of the RL Baselines3 Zoo (return 500 at 50k
frames): collect 256 frames, then 128 gradient steps on minibatches of 64, then copy the
online network into the target; one change: the learning rate decays linearly to 0 over
the run. At the zoo's constant 2.3e-3 the greedy return rises to 500 and then collapses
(catastrophic forgetting once the replay holds mostly balanced states: seed 0 ended at
106); decayed, 5 seeds of 5 reach 500 within 50k frames (docs/results.md).

    uv run recipes/dqn.py                        # CartPole-v1, 50k frames
    uv run recipes/dqn.py --prioritized true     # prioritized replay
    uv run recipes/dqn.py --smoke                # a few seconds, end to end
    uv run recipes/dqn.py --resume runs/dqn/checkpoint.pt
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from _config import RunConfig, parse_config


@dataclass
class Config(RunConfig):
    """Double DQN with hard target updates on a Gymnasium task with discrete actions."""

    env: str = "CartPole-v1"
    """Gymnasium id of the task (discrete actions)."""
    total_frames: int = 50_000
    """Frames to collect in total."""
    frames_per_batch: int = 256
    """Frames collected between two rounds of gradient steps."""
    init_random_frames: int = 1_000
    """Frames of uniformly random actions before learning starts."""
    num_updates: int = 128
    """Gradient steps after each collected batch."""
    batch_size: int = 64
    """Transitions per gradient step."""
    buffer_size: int = 100_000
    """Replay buffer capacity (transitions)."""
    prioritized: bool = False
    """Prioritized replay (proportional, by squared TD error) instead of uniform."""
    alpha: float = 0.6
    """Prioritization exponent (with --prioritized)."""
    beta: float = 0.4
    """Importance-sampling exponent (with --prioritized)."""
    lr: float = 2.3e-3
    """Adam learning rate (annealed linearly to 0 over the run when anneal_lr)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the planned gradient steps."""
    gamma: float = 0.99
    """Discount factor."""
    double_dqn: bool = True
    """Pick the bootstrap action with the online network (double DQN)."""
    target_update_interval: int = 128
    """Gradient steps between copies of the online network into the target."""
    eps_init: float = 1.0
    """Initial exploration epsilon."""
    eps_end: float = 0.04
    """Final exploration epsilon."""
    annealing_frames: int = 8_000
    """Frames over which epsilon goes linearly from eps_init to eps_end."""
    hidden: int = 256
    """Width of the two hidden layers of the Q-network."""
    max_grad_norm: float = 10.0
    """Gradient clipping norm."""
    eval_every: int = 5_120
    """Frames between deterministic (greedy) evaluations."""
    checkpoint_every: int = 10_240

    SMOKE: ClassVar[dict[str, object]] = {
        "total_frames": 2048,
        "init_random_frames": 512,
        "num_updates": 16,
        "annealing_frames": 1024,
        "eval_every": 1024,
        "eval_episodes": 1,
        "checkpoint_every": 1024,
    }


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import torch
from _common import AttrState, seed_everything
from _off_policy import OffPolicyRun, train_off_policy
from tensordict import TensorDictBase
from tensordict.nn import TensorDictSequential
from torch import nn

from rl_buffers import (
    LazyTensorStorage,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)
from rl_collectors import Collector
from rl_envs import Compose, DoubleToFloat, GymEnv, RewardSum, StepCounter, TransformedEnv
from rl_modules import MLP, EGreedyModule, QValueActor
from rl_objectives import DQNLoss, HardUpdate


def make_env(cfg: Config) -> TransformedEnv:
    return TransformedEnv(GymEnv(cfg.env), Compose(DoubleToFloat(), StepCounter(), RewardSum()))


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    env = make_env(cfg)
    env.set_seed(cfg.seed)
    action_spec = env.action_spec
    obs_dim = env.observation_spec["observation"].shape[-1]
    net = MLP(obs_dim, action_spec.shape[-1], num_cells=[cfg.hidden] * 2, activation_class=nn.ReLU)
    qvalue = QValueActor(net, in_keys=["observation"], spec=action_spec)
    greedy = EGreedyModule(action_spec, cfg.eps_init, cfg.eps_end, cfg.annealing_frames)
    loss_fn = DQNLoss(
        qvalue, loss_function="smooth_l1", delay_value=True, double_dqn=cfg.double_dqn
    )
    loss_fn.make_value_estimator(gamma=cfg.gamma)
    updater = HardUpdate(loss_fn, value_network_update_interval=cfg.target_update_interval)
    optim = torch.optim.Adam(loss_fn.parameters(), lr=cfg.lr)
    n_updates = max(cfg.total_frames - cfg.init_random_frames, 1) // cfg.frames_per_batch
    n_updates = max(n_updates * cfg.num_updates, 1)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optim, lambda i: max(1.0 - i / n_updates, 0.0) if cfg.anneal_lr else 1.0
    )
    storage = LazyTensorStorage(cfg.buffer_size)
    if cfg.prioritized:
        buffer = TensorDictPrioritizedReplayBuffer(
            alpha=cfg.alpha, beta=cfg.beta, storage=storage, batch_size=cfg.batch_size
        )
    else:
        buffer = TensorDictReplayBuffer(storage=storage, batch_size=cfg.batch_size)

    def update(sample: TensorDictBase) -> dict[str, object]:
        loss = loss_fn(sample)["loss"]
        optim.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(loss_fn.parameters(), cfg.max_grad_norm)
        optim.step()
        schedule.step()
        updater.step()
        if cfg.prioritized:
            buffer.update_tensordict_priority(sample)  # the loss wrote td_error into sample
        return {"loss": loss, "epsilon": greedy.eps, "lr": schedule.get_last_lr()[0]}

    run = OffPolicyRun(
        algo="dqn",
        collector=Collector(
            env,
            TensorDictSequential(qvalue, greedy),
            frames_per_batch=cfg.frames_per_batch,
            total_frames=cfg.total_frames,
            init_random_frames=cfg.init_random_frames,
        ),
        buffer=buffer,
        update=update,
        num_updates=cfg.num_updates,
        eval_env=make_env(cfg),
        eval_policy=qvalue,
        stateful={
            "loss": loss_fn,
            "optim": optim,
            "schedule": schedule,
            "greedy": greedy,
            "updater": AttrState(updater, "counter"),
        },
        on_batch=lambda batch: greedy.step(batch.numel()),
    )
    return train_off_policy(cfg, run)


if __name__ == "__main__":
    main()
