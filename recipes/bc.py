"""Behaviour cloning (Pomerleau, 1991; the D4RL baseline): regress the policy onto the
dataset's actions, no rewards used. A deterministic tanh-squashed MLP trained with the mean
squared error (``BCLoss(loss_function="l2")``); best on expert data.

    uv run recipes/make_dataset.py                     # writes the datasets first
    uv run recipes/bc.py --dataset runs/make_dataset/latest/d4rl/halfcheetah-expert-v0.hdf5
    uv run recipes/bc.py --smoke                       # seconds, on a tiny random dataset
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from _config import OfflineConfig, parse_config, smoke_overrides


@dataclass
class Config(OfflineConfig):
    """Behaviour cloning on a D4RL-format or Minari dataset (expert data by default)."""

    dataset: str = "runs/make_dataset/latest/d4rl/halfcheetah-expert-v0.hdf5"
    num_steps: int = 20_000
    lr: float = 3e-4
    """Adam learning rate."""
    hidden: int = 256
    """Width of the two hidden layers of the policy."""

    SMOKE: ClassVar[dict[str, object]] = smoke_overrides(hidden=32)


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import torch
from _offline import OfflineRun, setup_offline, train_offline
from td3_bc import make_deterministic_actor
from tensordict import TensorDictBase

from rl_objectives import BCLoss


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    env, buffer, references = setup_offline(cfg, "bc")
    actor = make_deterministic_actor(env, cfg.hidden)
    loss_fn = BCLoss(actor, loss_function="l2")
    optim = torch.optim.Adam(actor.parameters(), lr=cfg.lr)

    def update(sample: TensorDictBase) -> dict[str, torch.Tensor]:
        loss = loss_fn(sample)["loss_bc"]
        optim.zero_grad()
        loss.backward()
        optim.step()
        return {"loss_bc": loss}

    run = OfflineRun(
        algo="bc", update=update, eval_policy=actor, stateful={"actor": actor, "optim": optim}
    )
    return train_offline(cfg, run, env, buffer, references)


if __name__ == "__main__":
    main()
