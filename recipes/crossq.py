"""CrossQ (Bhatt et al., 2024, arXiv:1902.05605): SAC without target networks, its critics
batch-normalised (batch renormalisation) over the current and next state-action pairs at once.

Defaults follow the paper where this CPU allows: no target networks, Adam 1e-3 with
beta1 = 0.5, actor updated every third step, one gradient step per frame, batch 256,
BatchRenorm momentum 0.01. The paper's 2048-wide critics are 256 wide here (--critic-hidden
restores them). Compare it with recipes/sac.py at the same frame budget.

    uv run recipes/crossq.py                     # HalfCheetah-v5, 300k frames
    uv run recipes/crossq.py --env Pendulum-v1 --total-frames 10000 --init-random-frames 1000
    uv run recipes/crossq.py --smoke             # a few seconds, end to end
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, ClassVar

import sac
from _config import parse_config


@dataclass
class Config(sac.Config):
    """CrossQ on a Gymnasium task with continuous actions."""

    lr: float = 1e-3
    """Adam learning rate of the actor, the critics and the temperature."""
    adam_beta1: float = 0.5
    """Adam's first-moment decay (the paper's 0.5)."""
    policy_delay: int = 3
    """Critic steps per actor (and temperature) step."""
    critic_hidden: int = 256
    """Width of the critics' two hidden layers (the paper: 2048)."""
    bn_momentum: float = 0.01
    """Momentum of the critics' running batch statistics."""
    bn_warmup_steps: int = 100_000
    """Critic updates during which batch renormalisation acts as plain batch norm."""

    SMOKE: ClassVar[dict[str, object]] = {**sac.Config.SMOKE, "critic_hidden": 32, "hidden": 32}


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import torch
from _common import AttrState, seed_everything
from _off_policy import OffPolicyRun, train_off_policy
from tensordict import TensorDictBase
from torch import nn

from rl_buffers import LazyTensorStorage, TensorDictReplayBuffer
from rl_collectors import Collector
from rl_modules import BatchRenorm1d, ValueOperator
from rl_objectives import CrossQLoss


class BatchNormCritic(nn.Module):
    """Q(s, a): batch renormalisation before each linear layer (CrossQ's critic)."""

    def __init__(self, in_dim: int, hidden: int, momentum: float, warmup_steps: int) -> None:
        super().__init__()

        def norm(width: int) -> BatchRenorm1d:
            return BatchRenorm1d(width, momentum=momentum, warmup_steps=warmup_steps)

        self.net = nn.Sequential(
            norm(in_dim), nn.Linear(in_dim, hidden), nn.ReLU(),
            norm(hidden), nn.Linear(hidden, hidden), nn.ReLU(),
            norm(hidden), nn.Linear(hidden, 1),
        )  # fmt: skip

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([observation, action], -1)
        return self.net(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], 1)


def make_critic(cfg: Config, env: Any) -> ValueOperator:
    obs_dim = env.observation_spec["observation"].shape[-1]
    act_dim = env.action_spec.shape[-1]
    critic = BatchNormCritic(obs_dim + act_dim, cfg.critic_hidden, cfg.bn_momentum,
                             cfg.bn_warmup_steps)  # fmt: skip
    return ValueOperator(critic, in_keys=["observation", "action"], out_keys=["state_action_value"])


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    env, eval_env = sac.make_envs(cfg)
    actor, _ = sac.make_agent(cfg, env)
    loss_fn = CrossQLoss(
        actor, make_critic(cfg, env), num_qvalue_nets=2, loss_function="l2",
        alpha_init=cfg.alpha_init, action_spec=env.action_spec,
    )  # fmt: skip
    loss_fn.make_value_estimator(gamma=cfg.gamma)
    betas = (cfg.adam_beta1, 0.999)
    optim_actor = torch.optim.Adam(
        loss_fn.actor_network_params.flatten_keys().values(), lr=cfg.lr, betas=betas
    )
    optim_critic = torch.optim.Adam(
        loss_fn.qvalue_network_params.flatten_keys().values(), lr=cfg.lr, betas=betas
    )
    optim_alpha = torch.optim.Adam([loss_fn.log_alpha], lr=cfg.lr, betas=betas)
    counter = SimpleNamespace(steps=0)  # the actor moves every policy_delay-th step

    loss_step = torch.compile(loss_fn) if cfg.compile else loss_fn  # sac.Config's --compile

    def update(sample: TensorDictBase) -> dict[str, torch.Tensor]:
        losses = loss_step(sample)
        counter.steps += 1
        actor_step = counter.steps % cfg.policy_delay == 0
        total = losses["loss_qvalue"]
        if actor_step:
            total = total + losses["loss_actor"] + losses["loss_alpha"]
        for optim in (optim_actor, optim_critic, optim_alpha):
            optim.zero_grad()
        total.backward()  # each loss moves only its own parameters
        optim_critic.step()
        if actor_step:
            optim_actor.step()
            optim_alpha.step()
        return {k: losses[k] for k in ("loss_actor", "loss_qvalue", "alpha", "entropy")}

    run = OffPolicyRun(
        algo="crossq",
        collector=Collector(
            env,
            actor,
            frames_per_batch=cfg.frames_per_batch,
            total_frames=cfg.total_frames,
            init_random_frames=cfg.init_random_frames,
        ),
        buffer=TensorDictReplayBuffer(
            storage=LazyTensorStorage(cfg.buffer_size), batch_size=cfg.batch_size
        ),
        update=update,
        num_updates=int(cfg.frames_per_batch * cfg.utd_ratio),
        eval_env=eval_env,
        eval_policy=actor,
        stateful={
            "loss": loss_fn,
            "optim_actor": optim_actor,
            "optim_critic": optim_critic,
            "optim_alpha": optim_alpha,
            "counter": AttrState(counter, "steps"),
        },
    )
    return train_off_policy(cfg, run)


if __name__ == "__main__":
    main()
