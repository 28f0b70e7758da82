"""SAC (Haarnoja et al., 2018, arXiv:1812.05905): twin soft Q-critics with Polyak-averaged
targets, a tanh-Gaussian actor and a learned temperature.

Defaults follow TorchRL's and CleanRL's MuJoCo settings (256x256 ReLU networks, Adam 3e-4,
batch 256, tau 0.005, one gradient step per frame), with 5k random frames before learning.

    uv run recipes/sac.py                        # HalfCheetah-v5, 300k frames
    uv run recipes/sac.py --env Hopper-v5 --total-frames 1000000
    uv run recipes/sac.py --smoke                # a few seconds, end to end
    uv run recipes/sac.py --resume runs/sac/checkpoint.pt
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from _common import RunConfig, parse_config, seed_everything
from _off_policy import OffPolicyRun, train_off_policy
from tensordict import TensorDictBase
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from rl_buffers import LazyTensorStorage, TensorDictReplayBuffer
from rl_collectors import Collector
from rl_envs import Compose, DoubleToFloat, GymEnv, RewardSum, StepCounter, TransformedEnv
from rl_modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
from rl_objectives import SACLoss, SoftUpdate


@dataclass
class Config(RunConfig):
    """Soft actor-critic on a Gymnasium task with continuous actions."""

    env: str = "HalfCheetah-v5"
    """Gymnasium id of the task (continuous actions)."""
    total_frames: int = 300_000
    """Frames to collect in total."""
    frames_per_batch: int = 1_000
    """Frames collected between two rounds of gradient steps."""
    init_random_frames: int = 5_000
    """Frames of uniformly random actions before learning starts."""
    utd_ratio: float = 1.0
    """Gradient steps per collected frame."""
    batch_size: int = 256
    """Transitions per gradient step."""
    buffer_size: int = 1_000_000
    """Replay buffer capacity (transitions)."""
    lr: float = 3e-4
    """Adam learning rate of the actor, the critics and the temperature."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak step of the target critics."""
    alpha_init: float = 1.0
    """Initial temperature (learned towards entropy -dim(action))."""
    hidden: int = 256
    """Width of the two hidden layers of actor and critics."""
    output_dir: str = "runs/sac"

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


def make_env(cfg: Config) -> TransformedEnv:
    return TransformedEnv(GymEnv(cfg.env), Compose(DoubleToFloat(), StepCounter(), RewardSum()))


def make_agent(cfg: Config, env: TransformedEnv) -> tuple[ProbabilisticActor, ValueOperator]:
    action_spec = env.action_spec
    obs_dim = env.observation_spec["observation"].shape[-1]
    act_dim = action_spec.shape[-1]
    actor_net = nn.Sequential(
        MLP(obs_dim, 2 * act_dim, num_cells=[cfg.hidden] * 2, activation_class=nn.ReLU),
        NormalParamExtractor(scale_mapping="biased_softplus_1.0", scale_lb=0.1),
    )
    actor = ProbabilisticActor(
        TensorDictModule(actor_net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        spec=action_spec,
        distribution_class=TanhNormal,
    )
    qvalue = ValueOperator(
        MLP(obs_dim + act_dim, 1, num_cells=[cfg.hidden] * 2, activation_class=nn.ReLU),
        in_keys=["observation", "action"],
        out_keys=["state_action_value"],
    )
    return actor, qvalue


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    env = make_env(cfg)
    env.set_seed(cfg.seed)
    eval_env = make_env(cfg)
    actor, qvalue = make_agent(cfg, env)
    loss_fn = SACLoss(
        actor,
        qvalue,
        num_qvalue_nets=2,
        loss_function="l2",
        alpha_init=cfg.alpha_init,
        action_spec=env.action_spec,
        delay_qvalue=True,
    )
    loss_fn.make_value_estimator(gamma=cfg.gamma)
    updater = SoftUpdate(loss_fn, tau=cfg.tau)
    optim_actor = torch.optim.Adam(loss_fn.actor_network_params.flatten_keys().values(), lr=cfg.lr)
    optim_critic = torch.optim.Adam(
        loss_fn.qvalue_network_params.flatten_keys().values(), lr=cfg.lr
    )
    optim_alpha = torch.optim.Adam([loss_fn.log_alpha], lr=cfg.lr)
    optims = (optim_actor, optim_critic, optim_alpha)
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(cfg.buffer_size), batch_size=cfg.batch_size
    )

    def update(sample: TensorDictBase) -> dict[str, torch.Tensor]:
        losses = loss_fn(sample)
        total = losses["loss_actor"] + losses["loss_qvalue"] + losses["loss_alpha"]
        for optim in optims:
            optim.zero_grad()
        total.backward()  # each loss moves only its own parameters
        for optim in optims:
            optim.step()
        updater.step()
        return {
            "loss_actor": losses["loss_actor"],
            "loss_qvalue": losses["loss_qvalue"],
            "alpha": losses["alpha"],
            "entropy": losses["entropy"],
        }

    run = OffPolicyRun(
        algo="sac",
        collector=Collector(
            env,
            actor,
            frames_per_batch=cfg.frames_per_batch,
            total_frames=cfg.total_frames,
            init_random_frames=cfg.init_random_frames,
        ),
        buffer=buffer,
        update=update,
        num_updates=int(cfg.frames_per_batch * cfg.utd_ratio),
        eval_env=eval_env,
        eval_policy=actor,
        stateful={
            "loss": loss_fn,
            "optim_actor": optim_actor,
            "optim_critic": optim_critic,
            "optim_alpha": optim_alpha,
        },
    )
    return train_off_policy(cfg, run)


if __name__ == "__main__":
    main()
