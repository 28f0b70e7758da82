"""DDPG (Lillicrap et al., 2016, arXiv:1509.02971): a deterministic actor trained through one
Q-critic, both with Polyak-averaged targets, and Gaussian exploration noise.

Defaults follow CleanRL's MuJoCo settings (256x256 ReLU networks, Adam 3e-4, batch 256,
tau 0.005, exploration noise 0.1, 25k random frames before learning).

    uv run recipes/ddpg.py                       # HalfCheetah-v5, 1M frames
    uv run recipes/ddpg.py --env Hopper-v5 --total-frames 300000
    uv run recipes/ddpg.py --smoke               # a few seconds, end to end
    uv run recipes/ddpg.py --resume runs/ddpg/checkpoint.pt
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from _config import RunConfig, parse_config


@dataclass
class Config(RunConfig):
    """DDPG on a Gymnasium task with continuous actions."""

    env: str = "HalfCheetah-v5"
    """Gymnasium id of the task (continuous actions)."""
    total_frames: int = 1_000_000
    """Frames to collect in total."""
    frames_per_batch: int = 1_000
    """Frames collected between two rounds of gradient steps."""
    init_random_frames: int = 25_000
    """Frames of uniformly random actions before learning starts."""
    utd_ratio: float = 1.0
    """Gradient steps per collected frame."""
    batch_size: int = 256
    """Transitions per gradient step."""
    buffer_size: int = 1_000_000
    """Replay buffer capacity (transitions)."""
    lr: float = 3e-4
    """Adam learning rate of the actor and the critic."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak step of the target actor and critic."""
    exploration_noise: float = 0.1
    """Std of the Gaussian noise added to the actions while collecting (in action half-ranges)."""
    hidden: int = 256
    """Width of the two hidden layers of actor and critic."""

    SMOKE: ClassVar[dict[str, object]] = {
        "total_frames": 2_000,
        "frames_per_batch": 500,
        "init_random_frames": 1_000,
        "utd_ratio": 0.05,
        "buffer_size": 10_000,
        "eval_every": 2_000,
        "eval_episodes": 1,
        "checkpoint_every": 1_000,
    }


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import torch
from _common import action_half_range, seed_everything
from _off_policy import OffPolicyRun, train_off_policy
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from rl_buffers import LazyTensorStorage, TensorDictReplayBuffer
from rl_collectors import Collector
from rl_envs import Compose, DoubleToFloat, GymEnv, RewardSum, StepCounter, TransformedEnv
from rl_modules import MLP, AdditiveGaussianModule, ProbabilisticActor, TanhDelta, ValueOperator
from rl_objectives import DDPGLoss, SoftUpdate


def make_env(cfg: Config) -> TransformedEnv:
    return TransformedEnv(GymEnv(cfg.env), Compose(DoubleToFloat(), StepCounter(), RewardSum()))


def make_agent(cfg: Config, env: TransformedEnv) -> tuple[ProbabilisticActor, ValueOperator]:
    action_spec = env.action_spec
    obs_dim = env.observation_spec["observation"].shape[-1]
    act_dim = action_spec.shape[-1]
    actor_net = MLP(obs_dim, act_dim, num_cells=[cfg.hidden] * 2, activation_class=nn.ReLU)
    # a deterministic policy: tanh squashed into the action bounds read from the spec
    actor = ProbabilisticActor(
        TensorDictModule(actor_net, in_keys=["observation"], out_keys=["param"]),
        in_keys=["param"],
        spec=action_spec,
        distribution_class=TanhDelta,
    )
    critic = ValueOperator(
        MLP(obs_dim + act_dim, 1, num_cells=[cfg.hidden] * 2, activation_class=nn.ReLU),
        in_keys=["observation", "action"],
        out_keys=["state_action_value"],
    )
    return actor, critic


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    env = make_env(cfg)
    env.set_seed(cfg.seed)
    eval_env = make_env(cfg)
    actor, critic = make_agent(cfg, env)
    half_range = action_half_range(env.action_spec)
    exploration = AdditiveGaussianModule(
        env.action_spec,
        sigma_init=1.0,
        sigma_end=1.0,
        mean=0.0,
        std=cfg.exploration_noise * half_range,
    )
    policy = TensorDictSequential(actor, exploration)
    loss_fn = DDPGLoss(actor, critic, loss_function="l2", delay_actor=True, delay_value=True)
    loss_fn.make_value_estimator(gamma=cfg.gamma)
    updater = SoftUpdate(loss_fn, tau=cfg.tau)
    optim_actor = torch.optim.Adam(loss_fn.actor_network_params.flatten_keys().values(), lr=cfg.lr)
    optim_critic = torch.optim.Adam(loss_fn.value_network_params.flatten_keys().values(), lr=cfg.lr)
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(cfg.buffer_size), batch_size=cfg.batch_size
    )

    def update(sample: TensorDictBase) -> dict[str, torch.Tensor]:
        losses = loss_fn(sample)
        # the actor loss sees the critic's parameters detached: one backward serves both
        total = losses["loss_actor"] + losses["loss_value"]
        optim_actor.zero_grad()
        optim_critic.zero_grad()
        total.backward()
        optim_critic.step()
        optim_actor.step()
        updater.step()
        return {"loss_actor": losses["loss_actor"], "loss_value": losses["loss_value"]}

    run = OffPolicyRun(
        algo="ddpg",
        collector=Collector(
            env,
            policy,
            frames_per_batch=cfg.frames_per_batch,
            total_frames=cfg.total_frames,
            init_random_frames=cfg.init_random_frames,
        ),
        buffer=buffer,
        update=update,
        num_updates=int(cfg.frames_per_batch * cfg.utd_ratio),
        eval_env=eval_env,
        eval_policy=actor,
        stateful={"loss": loss_fn, "optim_actor": optim_actor, "optim_critic": optim_critic},
    )
    return train_off_policy(cfg, run)


if __name__ == "__main__":
    main()
