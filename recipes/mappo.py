"""MAPPO / IPPO (Yu et al. 2022, arXiv:2103.01955; de Witt et al. 2020, arXiv:2011.09533) on VMAS.

Defaults follow TorchRL's multi-agent PPO tutorial on VMAS navigation (3 agents, 60
vectorised envs, 100-step episodes, 6000 frames per batch, 30 epochs of 400-sample
minibatches): decentralised actors with shared parameters, a critic centralised over
all agents' observations (MAPPO) or local to each agent (``--mappo false``: IPPO).

    uv run recipes/mappo.py                       # MAPPO on navigation
    uv run recipes/mappo.py --mappo false         # IPPO
    uv run recipes/mappo.py --value-norm popart   # PopArt value normalisation
    uv run recipes/mappo.py --backend pettingzoo --scenario simple_spread_v3 --max-steps 25 \
        --frames-per-batch 1000 --minibatch-size 100 --eval-every 1000   # MPE simple_spread
    uv run recipes/mappo.py --smoke               # a few seconds, end to end
    uv run recipes/mappo.py --resume runs/mappo/checkpoint.pt
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from _config import RunConfig, parse_config


@dataclass
class Config(RunConfig):
    """MAPPO (centralised critic) or IPPO (local critics) on a VMAS task."""

    backend: str = "vmas"
    """Env library: vmas (batched) or pettingzoo (one parallel env, num_envs unused)."""
    scenario: str = "navigation"
    """VMAS scenario, or PettingZoo task (e.g. simple_spread_v3); continuous actions."""
    n_agents: int = 3
    """Agents in the scenario."""
    mappo: bool = True
    """Centralised critic (MAPPO); false: each agent's critic sees its own observation (IPPO)."""
    num_envs: int = 60
    """VMAS vectorised envs."""
    max_steps: int = 100
    """Episode length (VMAS sets done after it)."""
    total_frames: int = 30_000
    """Team frames to collect in total (one frame = one step of one env, all agents)."""
    frames_per_batch: int = 6_000
    """Team frames per collected batch."""
    epochs: int = 30
    """Passes over each batch."""
    minibatch_size: int = 400
    """Team frames per gradient step."""
    lr: float = 3e-4
    """Adam learning rate."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.9
    """GAE lambda."""
    clip_epsilon: float = 0.2
    """PPO ratio clipping."""
    entropy_coeff: float = 1e-4
    """Entropy bonus coefficient."""
    normalize_advantage: bool = True
    """Standardise advantages per agent (over batch and time, never across agents)."""
    value_norm: str = "none"
    """Critic target normalisation: none, popart or running."""
    hidden: int = 256
    """Width of the two hidden layers of actor and critic."""
    eval_every: int = 6_000
    eval_envs: int = 32
    """Envs of the deterministic evaluation (one episode each)."""
    checkpoint_every: int = 6_000

    SMOKE: ClassVar[dict[str, object]] = {
        "total_frames": 400,
        "frames_per_batch": 200,
        "num_envs": 4,
        "max_steps": 20,
        "epochs": 2,
        "minibatch_size": 100,
        "hidden": 16,
        "eval_every": 200,
        "eval_envs": 2,
        "checkpoint_every": 200,
    }


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import torch
from _common import (
    RunKeeper,
    RunLogger,
    Stopwatch,
    counters_state,
    finish_run,
    load_checkpoint,
    run_counters,
    run_folder,
    seed_everything,
)
from _marl import (
    GROUP,
    evaluate_team,
    finished_return,
    make_pettingzoo_env,
    make_vmas_env,
)
from tensordict.nn import TensorDictModule
from torch import nn

from rl_buffers import LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement
from rl_collectors import Collector
from rl_envs import TransformedEnv
from rl_modules import (
    MultiAgentMLP,
    NormalParamExtractor,
    PopArtValueNorm,
    ProbabilisticActor,
    RunningValueNorm,
    TanhNormal,
)
from rl_objectives import IPPOLoss, MAPPOLoss, MultiAgentGAE


def make_envs(cfg: Config) -> tuple[TransformedEnv, TransformedEnv]:
    """The training and evaluation envs, both with the agents in the group ``"agents"``."""
    if cfg.backend == "vmas":
        kwargs = {"n_agents": cfg.n_agents, "continuous_actions": True}
        return (
            make_vmas_env(cfg.scenario, cfg.num_envs, cfg.max_steps, cfg.seed, **kwargs),
            make_vmas_env(cfg.scenario, cfg.eval_envs, cfg.max_steps, cfg.seed + 10_000, **kwargs),
        )
    if cfg.backend == "pettingzoo":
        kwargs = {"N": cfg.n_agents, "continuous_actions": True}
        return (
            make_pettingzoo_env(cfg.scenario, cfg.max_steps, cfg.seed, **kwargs),
            make_pettingzoo_env(cfg.scenario, cfg.max_steps, cfg.seed + 10_000, **kwargs),
        )
    raise ValueError(f"--backend must be vmas or pettingzoo, got {cfg.backend!r}.")


def make_agent(cfg: Config, env) -> tuple[ProbabilisticActor, TensorDictModule]:
    obs_dim = env.observation_spec[GROUP, "observation"].shape[-1]
    action_spec = env.full_action_spec_unbatched[GROUP, "action"]
    act_dim = action_spec.shape[-1]
    policy_net = nn.Sequential(
        MultiAgentMLP(
            obs_dim,
            2 * act_dim,
            cfg.n_agents,
            centralized=False,
            share_params=True,
            depth=2,
            num_cells=cfg.hidden,
            activation_class=nn.Tanh,
        ),
        NormalParamExtractor(),
    )
    actor = ProbabilisticActor(
        TensorDictModule(
            policy_net,
            in_keys=[(GROUP, "observation")],
            out_keys=[(GROUP, "loc"), (GROUP, "scale")],
        ),
        in_keys=[(GROUP, "loc"), (GROUP, "scale")],
        out_keys=[(GROUP, "action")],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": action_spec.space.low, "high": action_spec.space.high},
        spec=action_spec,
        return_log_prob=True,
    )
    critic = TensorDictModule(
        MultiAgentMLP(
            obs_dim,
            1,
            cfg.n_agents,
            centralized=cfg.mappo,
            share_params=True,
            depth=2,
            num_cells=cfg.hidden,
            activation_class=nn.Tanh,
        ),
        in_keys=[(GROUP, "observation")],
        out_keys=[(GROUP, "state_value")],
    )
    return actor, critic


def make_value_norm(name: str) -> PopArtValueNorm | RunningValueNorm | None:
    norms = {"none": None, "popart": PopArtValueNorm, "running": RunningValueNorm}
    if name not in norms:
        raise ValueError(f"--value-norm must be one of {sorted(norms)}, got {name!r}.")
    return None if norms[name] is None else norms[name](shape=1)


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    out = run_folder(cfg, "mappo")
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    env, eval_env = make_envs(cfg)
    actor, critic = make_agent(cfg, env)
    keys = {
        "action": (GROUP, "action"),
        "sample_log_prob": (GROUP, "action_log_prob"),
        "value": (GROUP, "state_value"),
        "advantage": (GROUP, "advantage"),
        "value_target": (GROUP, "value_target"),
    }
    loss_cls = MAPPOLoss if cfg.mappo else IPPOLoss
    loss_fn = loss_cls(
        actor,
        critic,
        clip_epsilon=cfg.clip_epsilon,
        entropy_coeff=cfg.entropy_coeff,
        normalize_advantage=cfg.normalize_advantage,
        value_norm=make_value_norm(cfg.value_norm),
    ).set_keys(**keys)
    # per-agent rewards, team-level done / terminated (broadcast over the agents)
    advantage = MultiAgentGAE(gamma=cfg.gamma, lmbda=cfg.gae_lambda, value_network=critic)
    advantage.set_keys(
        reward=(GROUP, "reward"),
        value=keys["value"],
        advantage=keys["advantage"],
        value_target=keys["value_target"],
    )
    optim = torch.optim.Adam(loss_fn.parameters(), lr=cfg.lr)
    buffer = ReplayBuffer(
        storage=LazyTensorStorage(cfg.frames_per_batch),
        sampler=SamplerWithoutReplacement(),
        batch_size=cfg.minibatch_size,
    )
    collector = Collector(
        env, actor, frames_per_batch=cfg.frames_per_batch, total_frames=cfg.total_frames
    )

    state = load_checkpoint(cfg.resume, cfg) if cfg.resume else None
    if state is not None:
        loss_fn.load_state_dict(state["loss"])
        optim.load_state_dict(state["optim"])
        collector.load_state_dict(state["collector"])
    frames, wall, eval_return, next_eval, next_ckpt = run_counters(cfg, state)
    logger = RunLogger(out, cfg.total_frames, frames, cfg.target_return)
    clock = Stopwatch(wall)

    def snapshot() -> dict[str, object]:
        return {
            "loss": loss_fn.state_dict(),
            "optim": optim.state_dict(),
            "collector": collector.state_dict(),
            **counters_state(
                cfg,
                frames=frames,
                wall=clock.elapsed(),
                eval_return=eval_return,
                next_eval=next_eval,
                next_ckpt=next_ckpt,
            ),
        }

    keeper = RunKeeper(out, cfg, cfg.total_frames, state)
    try:
        for batch in collector:
            frames += batch.numel()
            train_return = finished_return(batch)
            if train_return is not None:
                logger.log(frames, **{"train/return": train_return})
            with torch.no_grad():
                advantage(batch)
            buffer.extend(batch.reshape(-1))
            for _ in range(cfg.epochs):
                for minibatch in buffer:
                    losses = loss_fn(minibatch)
                    total = (
                        losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
                    )
                    optim.zero_grad()
                    total.backward()
                    nn.utils.clip_grad_norm_(loss_fn.parameters(), cfg.max_grad_norm)
                    optim.step()
            collector.update_policy_weights_()
            logger.log(frames, loss=total.item(), entropy=losses["entropy"].item())
            if frames >= next_eval:
                next_eval += cfg.eval_every
                eval_return = evaluate_team(eval_env, actor, cfg.max_steps, seed=cfg.seed + 10_000)
                logger.log(frames, **{"eval/return": eval_return})
                keeper.evaluated(frames, eval_return, snapshot)
            if frames >= next_ckpt:
                next_ckpt += cfg.checkpoint_every
                keeper.save(snapshot())
            logger.advance(batch.numel())
            if eval_return >= cfg.target_return:
                break
    except KeyboardInterrupt:  # Ctrl-C: the final checkpoint below, then exit 130
        keeper.interrupted = True
    return finish_run(
        collector,
        logger,
        clock,
        out,
        algo="mappo" if cfg.mappo else "ippo",
        env=f"{cfg.backend}/{cfg.scenario}",
        frames=frames,
        eval_return=eval_return,
        keeper=keeper,
        snapshot=snapshot,
    )


if __name__ == "__main__":
    main()
