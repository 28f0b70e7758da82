"""IMPALA (Espeholt et al., 2018, arXiv:1802.01561): actor processes collect with whatever
weights they last received while one learner takes a gradient step per gathered batch,
correcting for the policy lag with V-trace.

Workers are a :class:`~rl_collectors.MultiAsyncCollector`; each update stacks
``batches_per_update`` trajectory batches (``[N, T]``), computes V-trace targets and
advantages, and takes one RMSprop step on the actor-critic loss. CartPole-v1 by default
(cheap to simulate, so the async workers are not starved on a small machine).

    uv run recipes/impala.py                     # CartPole-v1, 300k frames, 2 workers
    uv run recipes/impala.py --smoke             # a few seconds, end to end
    uv run recipes/impala.py --resume runs/impala/checkpoint.pt

Resuming restores the learner (networks, optimiser, counters, RNGs) exactly; the workers
restart from fresh episodes, and asynchronous collection is not reproducible by nature.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from _config import RunConfig, parse_config


@dataclass
class Config(RunConfig):
    """IMPALA (V-trace actor-critic with asynchronous actors) on a discrete-action task."""

    env: str = "CartPole-v1"
    """Gymnasium id of the task (discrete actions)."""
    num_workers: int = 2
    """Actor processes collecting in parallel."""
    total_frames: int = 300_000
    """Frames to collect in total."""
    frames_per_batch: int = 64
    """Frames (time steps) of one worker batch."""
    batches_per_update: int = 4
    """Worker batches stacked into one learner update."""
    lr: float = 1e-3
    """RMSprop learning rate (annealed linearly to 0 over the run when anneal_lr)."""
    anneal_lr: bool = False
    """Decay the learning rate linearly from lr to 0 at total_frames."""
    gamma: float = 0.99
    """Discount factor."""
    rho_thresh: float = 1.0
    """V-trace truncation of the importance weights."""
    c_thresh: float = 1.0
    """V-trace truncation of the traces."""
    entropy_coeff: float = 0.01
    """Entropy bonus coefficient."""
    critic_coeff: float = 0.5
    """Weight of the critic loss."""
    max_grad_norm: float = 40.0
    """Gradient clipping norm."""
    hidden: int = 64
    """Width of the two hidden layers of actor and critic."""
    torch_threads: int = 1
    """CPU threads for torch in the learner (small MLPs run fastest on one)."""
    eval_every: int = 20_000
    checkpoint_every: int = 100_000
    """Frames between checkpoints of the learner."""
    resume: str = ""
    """Checkpoint to continue from (learner state; the workers restart their episodes)."""

    SMOKE: ClassVar[dict[str, object]] = {
        "total_frames": 2_048,
        "eval_every": 1_024,
        "eval_episodes": 1,
        "checkpoint_every": 1_024,
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
    evaluate,
    finish_run,
    load_checkpoint,
    run_counters,
    run_folder,
    seed_everything,
)
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torch.distributions import Categorical

from rl_collectors import MultiAsyncCollector
from rl_envs import Compose, GymEnv, RewardSum, StepCounter, TransformedEnv
from rl_modules import MLP, ProbabilisticActor, ValueOperator
from rl_objectives import A2CLoss, VTrace


def make_env(env_name: str, seed: int | None = None) -> TransformedEnv:
    """One env, with integer actions (a Categorical spec) as the Categorical policy samples."""
    env = TransformedEnv(
        GymEnv(env_name, categorical_action_encoding=True), Compose(StepCounter(), RewardSum())
    )
    if seed is not None:
        env.set_seed(seed)
    return env


def make_agent(cfg: Config, env: TransformedEnv) -> tuple[ProbabilisticActor, ValueOperator]:
    obs_dim = env.observation_spec["observation"].shape[-1]
    actor = ProbabilisticActor(
        TensorDictModule(
            MLP(obs_dim, env.action_spec.n, num_cells=[cfg.hidden] * 2, activation_class=nn.Tanh),
            in_keys=["observation"],
            out_keys=["logits"],
        ),
        in_keys=["logits"],
        spec=env.action_spec,
        distribution_class=Categorical,
        return_log_prob=True,  # the behaviour log-probabilities V-trace corrects with
    )
    critic = ValueOperator(
        MLP(obs_dim, 1, num_cells=[cfg.hidden] * 2, activation_class=nn.Tanh),
        in_keys=["observation"],
    )
    return actor, critic


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    out = run_folder(cfg, "impala")
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    eval_env = make_env(cfg.env)
    actor, critic = make_agent(cfg, eval_env)
    vtrace = VTrace(
        gamma=cfg.gamma,
        value_network=critic,
        actor_network=actor,
        rho_thresh=cfg.rho_thresh,
        c_thresh=cfg.c_thresh,
    )
    loss_fn = A2CLoss(
        actor,
        critic,
        entropy_coeff=cfg.entropy_coeff,
        critic_coeff=cfg.critic_coeff,
        loss_critic_type="l2",
    )
    optim = torch.optim.RMSprop(loss_fn.parameters(), lr=cfg.lr, alpha=0.99, eps=1e-5)

    state = load_checkpoint(cfg.resume, cfg) if cfg.resume else None
    if state is not None:
        loss_fn.load_state_dict(state["loss"])
        optim.load_state_dict(state["optim"])
    frames, wall, eval_return, next_eval, next_ckpt = run_counters(cfg, state)
    # Worker seeds move on with the frame count, so a resumed run does not replay old episodes.
    env_fns = [partial(make_env, cfg.env, cfg.seed + frames + i) for i in range(cfg.num_workers)]
    collector = MultiAsyncCollector(
        env_fns,
        actor,
        frames_per_batch=cfg.frames_per_batch,
        # whole batches only, so that they stack into [N, T]
        total_frames=-(-max(cfg.total_frames - frames, 1) // cfg.frames_per_batch)
        * cfg.frames_per_batch,
        track_policy_version=True,  # each batch says which weights collected it
    )
    logger = RunLogger(out, cfg.total_frames, frames, cfg.target_return)
    clock = Stopwatch(wall)

    pending: list[TensorDict] = []

    def snapshot() -> dict[str, object]:
        return {
            "loss": loss_fn.state_dict(),
            "optim": optim.state_dict(),
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
            logger.log_episodes(frames, batch)
            logger.advance(batch.numel())
            pending.append(batch)
            if len(pending) < cfg.batches_per_update and frames < cfg.total_frames:
                continue
            data = torch.stack(pending)  # [N, T]: V-trace runs along the last (time) dim
            pending.clear()
            lag = collector.policy_version - data["policy_version"].float().mean()
            with torch.no_grad():
                vtrace(data)
            losses = loss_fn(data.reshape(-1))
            diagnostics = {
                k: v.item()
                for k, v in losses.items()
                if isinstance(v, torch.Tensor) and v.numel() == 1
            }
            total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
            optim.zero_grad()
            total.backward()
            nn.utils.clip_grad_norm_(loss_fn.parameters(), cfg.max_grad_norm)
            optim.step()
            if cfg.anneal_lr:  # the rate of the next update; a resumed run reads it back from optim
                for group in optim.param_groups:
                    group["lr"] = cfg.lr * max(1.0 - frames / cfg.total_frames, 0.0)
            collector.update_policy_weights_()
            logger.log(frames, loss=total.item(), policy_lag=lag.item(), **diagnostics)
            if frames >= next_eval:
                next_eval += cfg.eval_every
                eval_return = evaluate(eval_env, actor, cfg.eval_episodes, seed=cfg.seed + 10_000)
                logger.log(frames, **{"eval/return": eval_return})
                keeper.evaluated(frames, eval_return, snapshot)
            stop = frames >= cfg.total_frames or eval_return >= cfg.target_return
            if frames >= next_ckpt or stop:
                while next_ckpt <= frames:
                    next_ckpt += cfg.checkpoint_every
                keeper.save(snapshot())
            if stop:
                break
    except KeyboardInterrupt:  # Ctrl-C: the final checkpoint below, then exit 130
        keeper.interrupted = True
    return finish_run(
        collector,
        logger,
        clock,
        out,
        algo="impala",
        env=cfg.env,
        frames=frames,
        eval_return=eval_return,
        keeper=keeper,
        snapshot=snapshot,
    )


if __name__ == "__main__":
    main()
