"""CQL (Kumar, Zhou, Tucker and Levine, 2020, arXiv:2006.04779): SAC whose critics are pushed
down on sampled actions and up on dataset actions, so the policy does not exploit
over-estimated out-of-dataset actions.

Defaults follow the paper's D4RL MuJoCo settings (CQL(H), conservative weight 5 without the
Lagrange variant, 10 sampled actions per source, deterministic backup, 256x256 networks,
critic lr 3e-4, actor lr 1e-4, batch 256, tau 0.005).

    uv run recipes/make_dataset.py                     # writes the datasets first
    uv run recipes/cql.py --dataset runs/make_dataset/latest/d4rl/halfcheetah-medium-v0.hdf5
    uv run recipes/cql.py --smoke                      # seconds, on a tiny random dataset
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import sac
from _config import OfflineConfig, parse_config, smoke_overrides


@dataclass
class Config(OfflineConfig):
    """Conservative Q-learning on a D4RL-format or Minari dataset."""

    actor_lr: float = 1e-4
    """Adam learning rate of the actor and the temperature."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critics."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak step of the target critics."""
    min_q_weight: float = 5.0
    """Weight of the conservative term (the paper's alpha)."""
    num_random: int = 10
    """Actions sampled per state and per source (uniform, pi(s), pi(s')) for the log-sum-exp."""
    with_lagrange: bool = False
    """Learn the conservative weight to hold the gap at --lagrange-thresh."""
    lagrange_thresh: float = 10.0
    """Target gap of the Lagrange variant."""
    bc_steps: int = 0
    """First gradient steps in which the actor clones the data instead of maximising Q."""
    hidden: int = 256
    """Width of the two hidden layers of actor and critics."""

    SMOKE: ClassVar[dict[str, object]] = smoke_overrides(hidden=32, num_random=2, bc_steps=10)


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import torch
from _common import AttrState
from _offline import OfflineRun, setup_offline, train_offline
from tensordict import TensorDictBase

from rl_objectives import CQLLoss, SoftUpdate


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    env, buffer, references = setup_offline(cfg, "cql")
    actor, qvalue = sac.make_agent(cfg, env)
    loss_fn = CQLLoss(
        actor, qvalue, loss_function="l2", action_spec=env.action_spec,
        min_q_weight=cfg.min_q_weight, num_random=cfg.num_random,
        with_lagrange=cfg.with_lagrange, lagrange_thresh=cfg.lagrange_thresh,
        deterministic_backup=True,
    )  # fmt: skip
    loss_fn.make_value_estimator(gamma=cfg.gamma)
    updater = SoftUpdate(loss_fn, tau=cfg.tau)
    optims = {
        "optim_actor": torch.optim.Adam(
            loss_fn.actor_network_params.flatten_keys().values(), lr=cfg.actor_lr
        ),
        "optim_critic": torch.optim.Adam(
            loss_fn.qvalue_network_params.flatten_keys().values(), lr=cfg.critic_lr
        ),
        "optim_alpha": torch.optim.Adam([loss_fn.log_alpha], lr=cfg.actor_lr),
    }
    if cfg.with_lagrange:
        optims["optim_alpha_prime"] = torch.optim.Adam([loss_fn.log_alpha_prime], lr=cfg.critic_lr)
    counter = SimpleNamespace(steps=0)  # ends the behaviour-cloning warm start

    def update(sample: TensorDictBase) -> dict[str, torch.Tensor]:
        losses = loss_fn(sample)
        cloning = counter.steps < cfg.bc_steps
        counter.steps += 1
        total = (
            (losses["loss_actor_bc"] if cloning else losses["loss_actor"])
            + losses["loss_qvalue"]
            + losses["loss_cql"]
            + losses["loss_alpha"]
        )
        if cfg.with_lagrange:
            total = total + losses["loss_alpha_prime"]
        for optim in optims.values():
            optim.zero_grad()
        total.backward()  # each loss moves only its own parameters
        for optim in optims.values():
            optim.step()
        updater.step()
        keys = ("loss_actor", "loss_actor_bc", "loss_qvalue", "loss_cql", "alpha", "entropy")
        return {k: losses[k] for k in keys}

    run = OfflineRun(
        algo="cql",
        update=update,
        eval_policy=actor,
        stateful={"loss": loss_fn, **optims, "counter": AttrState(counter, "steps")},
    )
    return train_offline(cfg, run, env, buffer, references)


if __name__ == "__main__":
    main()
