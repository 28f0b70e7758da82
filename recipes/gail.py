"""GAIL (Ho and Ermon, 2016, arXiv:1606.03476) with an off-policy learner: a discriminator
D(s, a) learns to tell expert pairs from the agent's (GAILLoss, with the gradient penalty of
Gulrajani et al., 2017), and SAC maximises the reward -log(1 - D(s, a)) in place of the
env's (the off-policy form of Kostrikov et al., 2019, arXiv:1809.02925). The env's own
reward is only used to evaluate.

    uv run recipes/make_dataset.py               # writes the expert dataset first
    uv run recipes/gail.py --expert-dataset runs/make_dataset/latest/d4rl/halfcheetah-expert-v0.hdf5
    uv run recipes/gail.py --smoke               # seconds, Pendulum, a tiny random "expert"
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import sac
from _config import parse_config


@dataclass
class Config(sac.Config):
    """GAIL: imitate an expert dataset with a discriminator reward and a SAC learner."""

    expert_dataset: str = "runs/make_dataset/latest/d4rl/halfcheetah-expert-v0.hdf5"
    """D4RL HDF5 file of expert transitions (only observations and actions are used)."""
    disc_lr: float = 3e-4
    """Adam learning rate of the discriminator."""
    disc_hidden: int = 256
    """Width of the discriminator's two hidden layers."""
    gp_lambda: float = 10.0
    """Weight of the discriminator's gradient penalty (0: none)."""

    SMOKE: ClassVar[dict[str, object]] = {
        **sac.Config.SMOKE, "env": "Pendulum-v1", "expert_dataset": "", "hidden": 32,
        "disc_hidden": 32,
    }  # fmt: skip


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import torch
from _common import run_folder, seed_everything
from _off_policy import OffPolicyRun, train_off_policy
from _offline import load_d4rl, smoke_dataset
from tensordict import TensorDict, TensorDictBase
from torch import nn

from rl_buffers import LazyTensorStorage, TensorDictReplayBuffer
from rl_buffers.datasets import check_matches_env
from rl_collectors import Collector
from rl_modules import MLP, ValueOperator
from rl_objectives import GAILLoss, SACLoss, SoftUpdate


class Discriminator(nn.Module):
    """The probability that ``(s, a)`` is the expert's: an MLP ending in a sigmoid."""

    def __init__(self, in_dim: int, hidden: int) -> None:
        super().__init__()
        self.net = MLP(in_dim, 1, num_cells=[hidden] * 2, activation_class=nn.Tanh)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.net(observation, action))


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    run_folder(cfg, "gail")  # first: the smoke dataset goes into it
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    if cfg.smoke and not cfg.expert_dataset:
        cfg.expert_dataset = str(smoke_dataset(cfg))  # type: ignore[arg-type]
    env = sac.make_env(cfg)
    env.set_seed(cfg.seed)
    eval_env = sac.make_env(cfg)
    path = Path(cfg.expert_dataset)
    expert = load_d4rl(path, cfg.batch_size)
    check_matches_env(expert.storage[:1], env)
    actor, qvalue = sac.make_agent(cfg, env)
    loss_fn = SACLoss(actor, qvalue, num_qvalue_nets=2, loss_function="l2",
                      alpha_init=cfg.alpha_init, action_spec=env.action_spec, delay_qvalue=True)  # fmt: skip
    loss_fn.make_value_estimator(gamma=cfg.gamma)
    updater = SoftUpdate(loss_fn, tau=cfg.tau)
    obs_dim = env.observation_spec["observation"].shape[-1]
    disc = ValueOperator(
        Discriminator(obs_dim + env.action_spec.shape[-1], cfg.disc_hidden),
        in_keys=["observation", "action"],
        out_keys=["d_logits"],
    )
    gail = GAILLoss(disc, use_grad_penalty=cfg.gp_lambda > 0, gp_lambda=cfg.gp_lambda)
    optim_disc = torch.optim.Adam(disc.parameters(), lr=cfg.disc_lr)
    optims = (
        torch.optim.Adam(loss_fn.actor_network_params.flatten_keys().values(), lr=cfg.lr),
        torch.optim.Adam(loss_fn.qvalue_network_params.flatten_keys().values(), lr=cfg.lr),
        torch.optim.Adam([loss_fn.log_alpha], lr=cfg.lr),
    )

    def update(sample: TensorDictBase) -> dict[str, torch.Tensor]:
        demo = expert.sample()
        pairs = TensorDict(
            observation=demo["observation"], action=demo["action"],
            collector_observation=sample["observation"], collector_action=sample["action"],
            batch_size=sample.batch_size,
        )  # fmt: skip
        loss_disc = gail(pairs)["loss"]
        optim_disc.zero_grad()
        loss_disc.backward()
        optim_disc.step()
        with torch.no_grad():
            d = disc(sample.select("observation", "action"))["d_logits"]
        sample["next", "reward"] = -torch.log1p(-d.clamp(max=1 - 1e-6))
        losses = loss_fn(sample)
        total = losses["loss_actor"] + losses["loss_qvalue"] + losses["loss_alpha"]
        for optim in optims:
            optim.zero_grad()
        total.backward()  # each loss moves only its own parameters
        for optim in optims:
            optim.step()
        updater.step()
        return {
            "loss_discriminator": loss_disc,
            "expert_prob_agent": d.mean(),
            "loss_actor": losses["loss_actor"],
            "loss_qvalue": losses["loss_qvalue"],
        }

    run = OffPolicyRun(
        algo="gail",
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
            "discriminator": disc,
            "optim_disc": optim_disc,
            **{f"optim_{n}": o for n, o in zip(("actor", "critic", "alpha"), optims, strict=True)},
        },
    )
    return train_off_policy(cfg, run)


if __name__ == "__main__":
    main()
