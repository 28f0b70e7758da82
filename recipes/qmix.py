"""QMIX / VDN (Rashid et al. 2018, arXiv:1803.11485; Sunehag et al. 2017, arXiv:1706.05296) on VMAS.

Discrete-action VMAS navigation (3 agents): a Q-network shared by the agents, an
e-greedy collector, a replay buffer and :class:`rl_objectives.QMixerLoss` with a QMIX
mixer (hypernetworks of the agents' stacked observations) or VDN (``--mixer vdn``).
The team reward is the mean of the agents' rewards, as in TorchRL's qmix_vdn example.

    uv run recipes/qmix.py                  # QMIX on discrete navigation
    uv run recipes/qmix.py --mixer vdn      # VDN
    uv run recipes/qmix.py --smoke          # a few seconds, end to end
    uv run recipes/qmix.py --resume runs/qmix/checkpoint.pt
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from _config import RunConfig, parse_config


@dataclass
class Config(RunConfig):
    """QMIX or VDN value decomposition on a discrete VMAS task."""

    scenario: str = "navigation"
    """VMAS scenario (discrete actions)."""
    n_agents: int = 3
    """Agents in the scenario."""
    mixer: str = "qmix"
    """Mixer: qmix or vdn."""
    num_envs: int = 60
    """VMAS vectorised envs."""
    max_steps: int = 100
    """Episode length (VMAS sets done after it)."""
    total_frames: int = 300_000
    """Team frames to collect in total."""
    frames_per_batch: int = 6_000
    """Team frames per collected batch."""
    buffer_size: int = 60_000
    """Replay buffer capacity (team frames)."""
    updates_per_batch: int = 60
    """Gradient steps after each batch."""
    minibatch_size: int = 1024
    """Team frames per gradient step."""
    lr: float = 5e-4
    """Adam learning rate."""
    max_grad_norm: float = 40.0
    """Gradient clipping norm."""
    gamma: float = 0.9
    """Discount factor."""
    tau: float = 0.005
    """Soft target update rate."""
    eps_init: float = 0.3
    """Initial e-greedy exploration."""
    eps_end: float = 0.0
    """Final e-greedy exploration, reached at half the run."""
    hidden: int = 256
    """Width of the two hidden layers of the agents' Q-network."""
    mixing_embed_dim: int = 32
    """Width of the QMIX mixing layer."""
    eval_every: int = 30_000
    eval_envs: int = 32
    """Envs of the greedy evaluation (one episode each)."""
    checkpoint_every: int = 30_000

    SMOKE: ClassVar[dict[str, object]] = {
        "total_frames": 400,
        "frames_per_batch": 200,
        "buffer_size": 1000,
        "num_envs": 4,
        "max_steps": 20,
        "updates_per_batch": 2,
        "minibatch_size": 64,
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
    buffer_state_dict,
    counters_state,
    finish_run,
    load_buffer_state_dict,
    load_checkpoint,
    run_counters,
    run_folder,
    seed_everything,
)
from _marl import GROUP, evaluate_team, finished_return, make_vmas_env
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from rl_buffers import LazyTensorStorage, RandomSampler, ReplayBuffer
from rl_collectors import Collector
from rl_modules import EGreedyModule, MultiAgentMLP, QMixer, QValueModule, VDNMixer
from rl_objectives import QMixerLoss, SoftUpdate, ValueEstimators


def make_agent(cfg: Config, env) -> tuple[TensorDictSequential, TensorDictModule]:
    obs_spec = env.observation_spec_unbatched[GROUP, "observation"]
    action_spec = env.full_action_spec_unbatched[GROUP, "action"]
    qnet = TensorDictModule(
        MultiAgentMLP(
            obs_spec.shape[-1],
            action_spec.space.n,
            cfg.n_agents,
            centralized=False,
            share_params=True,
            depth=2,
            num_cells=cfg.hidden,
            activation_class=nn.Tanh,
        ),
        in_keys=[(GROUP, "observation")],
        out_keys=[(GROUP, "action_value")],
    )
    head = QValueModule(
        action_value_key=(GROUP, "action_value"),
        out_keys=[(GROUP, "action"), (GROUP, "action_value"), (GROUP, "chosen_action_value")],
        spec=action_spec,
    )
    policy = TensorDictSequential(qnet, head)
    if cfg.mixer == "qmix":
        mixer = TensorDictModule(
            QMixer(
                state_shape=obs_spec.shape,  # the agents' stacked observations
                mixing_embed_dim=cfg.mixing_embed_dim,
                n_agents=cfg.n_agents,
            ),
            in_keys=[(GROUP, "chosen_action_value"), (GROUP, "observation")],
            out_keys=["chosen_action_value"],
        )
    elif cfg.mixer == "vdn":
        mixer = TensorDictModule(
            VDNMixer(n_agents=cfg.n_agents),
            in_keys=[(GROUP, "chosen_action_value")],
            out_keys=["chosen_action_value"],
        )
    else:
        raise ValueError(f"--mixer must be qmix or vdn, got {cfg.mixer!r}.")
    return policy, mixer


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    out = run_folder(cfg, "qmix")
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    scenario_kwargs = {"n_agents": cfg.n_agents, "continuous_actions": False}
    env = make_vmas_env(cfg.scenario, cfg.num_envs, cfg.max_steps, cfg.seed, **scenario_kwargs)
    eval_env = make_vmas_env(
        cfg.scenario, cfg.eval_envs, cfg.max_steps, cfg.seed + 10_000, **scenario_kwargs
    )
    policy, mixer = make_agent(cfg, env)
    explore = EGreedyModule(
        env.full_action_spec_unbatched[GROUP, "action"],
        eps_init=cfg.eps_init,
        eps_end=cfg.eps_end,
        annealing_num_steps=max(cfg.total_frames // (2 * cfg.frames_per_batch), 1),
        action_key=(GROUP, "action"),
    )
    collector = Collector(
        env,
        TensorDictSequential(policy, explore),
        frames_per_batch=cfg.frames_per_batch,
        total_frames=cfg.total_frames,
    )
    loss_fn = QMixerLoss(policy, mixer, delay_value=True, action_space="categorical")
    loss_fn.make_value_estimator(ValueEstimators.TD0, gamma=cfg.gamma)
    target_updater = SoftUpdate(loss_fn, tau=cfg.tau)
    optim = torch.optim.Adam(loss_fn.parameters(), lr=cfg.lr)
    buffer = ReplayBuffer(
        storage=LazyTensorStorage(cfg.buffer_size),
        sampler=RandomSampler(),
        batch_size=cfg.minibatch_size,
    )

    state = load_checkpoint(cfg.resume, cfg) if cfg.resume else None
    if state is not None:
        loss_fn.load_state_dict(state["loss"])
        optim.load_state_dict(state["optim"])
        collector.load_state_dict(state["collector"])
        load_buffer_state_dict(buffer, state["buffer"])
        explore.load_state_dict(state["explore"])
    frames, wall, eval_return, next_eval, next_ckpt = run_counters(cfg, state)
    logger = RunLogger(out, cfg.total_frames, frames, cfg.target_return)
    clock = Stopwatch(wall)

    def snapshot() -> dict[str, object]:
        return {
            "loss": loss_fn.state_dict(),
            "optim": optim.state_dict(),
            "collector": collector.state_dict(),
            "buffer": buffer_state_dict(buffer),
            "explore": explore.state_dict(),
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
            # the team reward: the agents' mean (QMIX / VDN learn one team value)
            batch.set(("next", "reward"), batch.get(("next", GROUP, "reward")).mean(-2))
            buffer.extend(batch.reshape(-1))
            for _ in range(cfg.updates_per_batch):
                losses = loss_fn(buffer.sample())
                optim.zero_grad()
                losses["loss"].backward()
                nn.utils.clip_grad_norm_(loss_fn.parameters(), cfg.max_grad_norm)
                optim.step()
                target_updater.step()
            explore.step()  # one annealing step per batch
            collector.update_policy_weights_()
            logger.log(frames, loss=losses["loss"].item(), epsilon=float(explore.eps))
            if frames >= next_eval:
                next_eval += cfg.eval_every
                eval_return = evaluate_team(eval_env, policy, cfg.max_steps, seed=cfg.seed + 10_000)
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
        algo=cfg.mixer,
        env=f"vmas/{cfg.scenario}",
        frames=frames,
        eval_return=eval_return,
        keeper=keeper,
        snapshot=snapshot,
    )


if __name__ == "__main__":
    main()
