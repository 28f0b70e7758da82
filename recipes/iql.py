"""IQL (Kostrikov, Nair and Levine, 2021, arXiv:2110.06169): offline RL without querying
out-of-dataset actions. An expectile of the critics' values gives V(s); the critics regress
onto r + gamma V(s'); the actor clones dataset actions weighted by exp(beta * advantage).

Defaults follow the paper's MuJoCo settings (256x256 networks, Adam 3e-4, batch 256,
expectile 0.7, inverse temperature 3, tau 0.005), without its cosine actor schedule.

    uv run recipes/make_dataset.py                     # writes the datasets first
    uv run recipes/iql.py --dataset runs/make_dataset/latest/d4rl/halfcheetah-medium-v0.hdf5
    uv run recipes/iql.py --dataset local/halfcheetah/medium-v0 \\
        --minari-root runs/make_dataset/latest/minari         # the same data in Minari format
    uv run recipes/iql.py --smoke                      # seconds, on a tiny random dataset
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import sac
from _config import OfflineConfig, parse_config, smoke_overrides


@dataclass
class Config(OfflineConfig):
    """Implicit Q-learning on a D4RL-format or Minari dataset."""

    lr: float = 3e-4
    """Adam learning rate of the actor, the critics and the value network."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak step of the target critics."""
    expectile: float = 0.7
    """Expectile of the value regression (0.5: the mean, towards 1: the max)."""
    temperature: float = 3.0
    """Inverse temperature beta of the advantage weights."""
    hidden: int = 256
    """Width of the two hidden layers of every network."""

    SMOKE: ClassVar[dict[str, object]] = smoke_overrides(hidden=32)


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import torch
from _offline import OfflineRun, setup_offline, train_offline
from tensordict import TensorDictBase
from torch import nn

from rl_modules import MLP, ValueOperator
from rl_objectives import IQLLoss, SoftUpdate


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    env, buffer, references = setup_offline(cfg, "iql")
    actor, qvalue = sac.make_agent(cfg, env)  # SAC's tanh-Gaussian actor and Q(s, a) critic
    obs_dim = env.observation_spec["observation"].shape[-1]
    value = ValueOperator(
        MLP(obs_dim, 1, num_cells=[cfg.hidden] * 2, activation_class=nn.ReLU),
        in_keys=["observation"],
        out_keys=["state_value"],
    )
    loss_fn = IQLLoss(
        actor, qvalue, value, loss_function="l2", expectile=cfg.expectile,
        temperature=cfg.temperature,
    )  # fmt: skip
    loss_fn.make_value_estimator(gamma=cfg.gamma)
    updater = SoftUpdate(loss_fn, tau=cfg.tau)
    optims = {
        f"optim_{name}": torch.optim.Adam(
            loss_fn.network_params(f"{name}_network").flatten_keys().values(), lr=cfg.lr
        )
        for name in ("actor", "qvalue", "value")
    }

    def update(sample: TensorDictBase) -> dict[str, torch.Tensor]:
        losses = loss_fn(sample)
        total = losses["loss_actor"] + losses["loss_qvalue"] + losses["loss_value"]
        for optim in optims.values():
            optim.zero_grad()
        total.backward()  # each loss moves only its own network's parameters
        for optim in optims.values():
            optim.step()
        updater.step()
        return {k: losses[k] for k in ("loss_actor", "loss_qvalue", "loss_value", "entropy")}

    run = OfflineRun(
        algo="iql", update=update, eval_policy=actor, stateful={"loss": loss_fn, **optims}
    )
    return train_offline(cfg, run, env, buffer, references)


if __name__ == "__main__":
    main()
