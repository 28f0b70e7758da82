"""REDQ (Chen, Wang, Zhou and Ross, 2021, arXiv:2101.05982): SAC with an ensemble of N critics,
the target the minimum of a random subset of M, and many gradient steps per frame.

Defaults follow the paper (N = 10 critics, M = 2, 256x256 networks, Adam 3e-4, batch 256,
tau 0.005) except the update-to-data ratio: the paper's 20 is --utd-ratio 20; the default
here is SAC's 1, so the two recipes compare at the same frames and the same gradient steps.
The critics' parameters are stacked, evaluated in one batched call (REDQLoss).

    uv run recipes/redq.py                       # HalfCheetah-v5, 300k frames
    uv run recipes/redq.py --env Pendulum-v1 --total-frames 10000 --utd-ratio 20
    uv run recipes/redq.py --smoke               # a few seconds, end to end
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import sac
from _config import parse_config


@dataclass
class Config(sac.Config):
    """REDQ on a Gymnasium task with continuous actions."""

    num_qvalue_nets: int = 10
    """Critics in the ensemble (N)."""
    sub_sample_len: int = 2
    """Critics whose minimum makes the target (M)."""

    SMOKE: ClassVar[dict[str, object]] = {**sac.Config.SMOKE, "hidden": 32, "num_qvalue_nets": 4}


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import torch
from _common import seed_everything
from _off_policy import OffPolicyRun, train_off_policy
from tensordict import TensorDictBase

from rl_buffers import LazyTensorStorage, TensorDictReplayBuffer
from rl_collectors import Collector
from rl_objectives import REDQLoss, SoftUpdate


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    env, eval_env = sac.make_envs(cfg)
    actor, qvalue = sac.make_agent(cfg, env)
    loss_fn = REDQLoss(
        actor, qvalue, num_qvalue_nets=cfg.num_qvalue_nets, sub_sample_len=cfg.sub_sample_len,
        loss_function="l2", alpha_init=cfg.alpha_init, action_spec=env.action_spec,
    )  # fmt: skip
    loss_fn.make_value_estimator(gamma=cfg.gamma)
    updater = SoftUpdate(loss_fn, tau=cfg.tau)
    optim_actor = torch.optim.Adam(loss_fn.actor_network_params.flatten_keys().values(), lr=cfg.lr)
    optim_critic = torch.optim.Adam(
        loss_fn.qvalue_network_params.flatten_keys().values(), lr=cfg.lr
    )
    optim_alpha = torch.optim.Adam([loss_fn.log_alpha], lr=cfg.lr)
    optims = (optim_actor, optim_critic, optim_alpha)

    loss_step = torch.compile(loss_fn) if cfg.compile else loss_fn  # sac.Config's --compile

    def update(sample: TensorDictBase) -> dict[str, torch.Tensor]:
        losses = loss_step(sample)
        total = losses["loss_actor"] + losses["loss_qvalue"] + losses["loss_alpha"]
        for optim in optims:
            optim.zero_grad()
        total.backward()  # each loss moves only its own parameters
        for optim in optims:
            optim.step()
        updater.step()
        return {k: losses[k] for k in ("loss_actor", "loss_qvalue", "alpha", "entropy")}

    run = OffPolicyRun(
        algo="redq",
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
        },
    )
    return train_off_policy(cfg, run)


if __name__ == "__main__":
    main()
