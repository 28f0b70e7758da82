"""TD3+BC (Fujimoto and Gu, 2021, arXiv:2106.06860): TD3 whose actor also regresses onto the
dataset's actions, the critic term normalised by ``alpha / mean|Q|``.

Defaults follow the paper (alpha 2.5, policy noise 0.2 clipped at 0.5, actor updated every
second step, 256x256 networks, Adam 3e-4, batch 256, tau 0.005); the paper's observation
normalisation is left out.

    uv run recipes/make_dataset.py                     # writes the datasets first
    uv run recipes/td3_bc.py --dataset runs/make_dataset/latest/d4rl/halfcheetah-medium-v0.hdf5
    uv run recipes/td3_bc.py --smoke                   # seconds, on a tiny random dataset
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, ClassVar

from _config import OfflineConfig, parse_config, smoke_overrides


@dataclass
class Config(OfflineConfig):
    """TD3+BC on a D4RL-format or Minari dataset."""

    lr: float = 3e-4
    """Adam learning rate of the actor and the critics."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak step of the target actor and critics."""
    alpha: float = 2.5
    """Scale of the normalised critic term against behaviour cloning."""
    policy_noise: float = 0.2
    """Std of the target policy smoothing noise."""
    noise_clip: float = 0.5
    """Clip of the target policy smoothing noise."""
    policy_delay: int = 2
    """Critic steps per actor (and target) step."""
    hidden: int = 256
    """Width of the two hidden layers of actor and critics."""

    SMOKE: ClassVar[dict[str, object]] = smoke_overrides(hidden=32)


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import torch
from _common import AttrState
from _offline import OfflineRun, setup_offline, train_offline
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from rl_modules import MLP, TanhModule, ValueOperator
from rl_objectives import SoftUpdate, TD3BCLoss


def make_deterministic_actor(env: Any, hidden: int) -> TensorDictSequential:
    """An MLP from observation to action, squashed into the action bounds by tanh."""
    obs_dim = env.observation_spec["observation"].shape[-1]
    act_dim = env.action_spec.shape[-1]
    return TensorDictSequential(
        TensorDictModule(
            MLP(obs_dim, act_dim, num_cells=[hidden] * 2, activation_class=nn.ReLU),
            in_keys=["observation"],
            out_keys=["action_raw"],
        ),
        TanhModule(in_keys=["action_raw"], out_keys=["action"], spec=env.action_spec),
    )


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    env, buffer, references = setup_offline(cfg, "td3_bc")
    actor = make_deterministic_actor(env, cfg.hidden)
    obs_dim = env.observation_spec["observation"].shape[-1]
    act_dim = env.action_spec.shape[-1]
    qvalue = ValueOperator(
        MLP(obs_dim + act_dim, 1, num_cells=[cfg.hidden] * 2, activation_class=nn.ReLU),
        in_keys=["observation", "action"],
        out_keys=["state_action_value"],
    )
    loss_fn = TD3BCLoss(
        actor, qvalue, action_spec=env.action_spec, alpha=cfg.alpha, loss_function="l2",
        policy_noise=cfg.policy_noise, noise_clip=cfg.noise_clip,
    )  # fmt: skip
    loss_fn.make_value_estimator(gamma=cfg.gamma)
    updater = SoftUpdate(loss_fn, tau=cfg.tau)
    optim_actor = torch.optim.Adam(loss_fn.actor_network_params.flatten_keys().values(), lr=cfg.lr)
    optim_critic = torch.optim.Adam(
        loss_fn.qvalue_network_params.flatten_keys().values(), lr=cfg.lr
    )
    counter = SimpleNamespace(steps=0)  # the actor moves every policy_delay-th step

    def update(sample: TensorDictBase) -> dict[str, torch.Tensor]:
        losses = loss_fn(sample)
        counter.steps += 1
        actor_step = counter.steps % cfg.policy_delay == 0
        # one backward before any step: the actor term reads the critics' (detached) weights
        total = losses["loss_qvalue"] + (losses["loss_actor"] if actor_step else 0.0)
        optim_critic.zero_grad()
        optim_actor.zero_grad()
        total.backward()
        optim_critic.step()
        if actor_step:
            optim_actor.step()
            updater.step()
        return {k: losses[k] for k in ("loss_actor", "loss_qvalue", "bc_loss", "lmbd")}

    run = OfflineRun(
        algo="td3_bc",
        update=update,
        eval_policy=actor,
        stateful={
            "loss": loss_fn,
            "optim_actor": optim_actor,
            "optim_critic": optim_critic,
            "counter": AttrState(counter, "steps"),
        },
    )
    return train_offline(cfg, run, env, buffer, references)


if __name__ == "__main__":
    main()
