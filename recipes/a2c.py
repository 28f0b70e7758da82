"""A2C (Mnih et al., 2016, arXiv:1602.01783): synchronous advantage actor-critic, one gradient
step per short batch of n-step rollouts from parallel envs.

The default task is CartPole-v1 with the RL Baselines3 Zoo setting (8 envs x 5 steps,
RMSprop 7e-4, no entropy bonus; return 500 within 500k frames): A2C is an on-policy method
with one small update per 40 frames, which makes it cheap and fast on a classic-control task
and slow to reach good returns on MuJoCo tasks (``--env InvertedPendulum-v5`` also works).

    uv run recipes/a2c.py                        # CartPole-v1, 500k frames
    uv run recipes/a2c.py --smoke                # a few seconds, end to end
    uv run recipes/a2c.py --preset zoo-halfcheetah  # HalfCheetah-v5, 1M frames, RL Zoo's setting
    uv run recipes/a2c.py --resume runs/a2c/checkpoint.pt
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from _config import RunConfig, parse_config


@dataclass
class Config(RunConfig):
    """Advantage actor-critic on a Gymnasium task."""

    env: str = "CartPole-v1"
    """Gymnasium id of the task (discrete or continuous actions)."""
    num_envs: int = 8
    """Envs stepped together (one Gymnasium vector env)."""
    total_frames: int = 500_000
    """Frames to collect in total."""
    frames_per_batch: int = 40
    """Frames per gradient step (num_envs x rollout steps)."""
    lr: float = 7e-4
    """RMSprop learning rate."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 1.0
    """GAE lambda (1.0: n-step returns bootstrapped from the critic)."""
    entropy_coeff: float = 0.0
    """Entropy bonus coefficient."""
    critic_coeff: float = 0.5
    """Weight of the critic loss."""
    max_grad_norm: float = 0.5
    """Gradient clipping norm."""
    hidden: int = 64
    """Width of the two hidden layers of actor and critic."""
    tanh_squash: bool = True
    """Continuous actions from a tanh-squashed Gaussian (True), or from a Gaussian whose
    samples the env clips to the action bounds (False: SB3's A2C, CleanRL)."""
    normalize: bool = False
    """Normalise observations (running statistics, clipped at 10) and training rewards (by
    the discounted return's std), as SB3's VecNormalize."""
    eval_every: int = 20_000
    checkpoint_every: int = 100_000

    SMOKE: ClassVar[dict[str, object]] = {
        "total_frames": 2_000,
        "eval_every": 1_000,
        "eval_episodes": 1,
        "checkpoint_every": 1_000,
    }
    PRESETS: ClassVar[dict[str, dict[str, object]]] = {
        # RL Baselines3 Zoo's A2C for HalfCheetah (hyperparams/a2c.yml: SB3's defaults with
        # VecNormalize; benchmark.md 3041 +- 157 at 1M): one env, 5-step rollouts.
        "zoo-halfcheetah": {
            "env": "HalfCheetah-v5",
            "num_envs": 1,
            "frames_per_batch": 5,
            "total_frames": 1_000_000,
            "normalize": True,
            "tanh_squash": False,
            "eval_every": 50_000,
            "checkpoint_every": 250_000,
        },
    }


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import torch
from _common import (
    RunKeeper,
    RunLogger,
    ScalarMeans,
    Stopwatch,
    copy_frozen_stats,
    counters_state,
    evaluate,
    finish_run,
    load_checkpoint,
    normalized_env,
    orthogonal_init,
    run_counters,
    run_folder,
    seed_everything,
    stochastic_actor,
)
from torch import nn

from rl_collectors import Collector
from rl_envs import GymEnv, TransformedEnv, VecNorm
from rl_modules import MLP, ProbabilisticActor, ValueOperator
from rl_objectives import GAE, A2CLoss


def make_env(cfg: Config, num_envs: int, vecnorm: VecNorm | None, train: bool) -> TransformedEnv:
    """The task; with ``vecnorm`` observations are normalised and clipped at 10, and training
    rewards are scaled (logged and evaluated returns stay raw)."""
    # integer actions (a Categorical spec), as the Categorical policy samples them
    base = GymEnv(cfg.env, num_envs if num_envs > 1 else 0, categorical_action_encoding=True)
    return normalized_env(
        base,
        vecnorm,
        obs_clip=10.0,
        reward_gamma=cfg.gamma if train and vecnorm is not None else None,
        clip_actions=not cfg.tanh_squash,
    )


def make_agent(cfg: Config, env: TransformedEnv) -> tuple[ProbabilisticActor, ValueOperator]:
    action_spec = env.action_spec_unbatched
    obs_dim = env.observation_spec["observation"].shape[-1]
    discrete = not action_spec.dtype.is_floating_point
    n_out = action_spec.n if discrete else action_spec.shape[-1]
    body = MLP(obs_dim, n_out, num_cells=[cfg.hidden] * 2, activation_class=nn.Tanh)
    critic_body = MLP(obs_dim, 1, num_cells=[cfg.hidden] * 2, activation_class=nn.Tanh)
    if not discrete:
        # SB3's continuous A2C: a state-independent log-std (starting at 0) and orthogonal
        # weights; a state-dependent scale with torch's default init collapsed on HalfCheetah
        orthogonal_init(body, last_gain=0.01)
        orthogonal_init(critic_body, last_gain=1.0)
    actor = stochastic_actor(body, action_spec, tanh_squash=cfg.tanh_squash)
    critic = ValueOperator(critic_body, in_keys=["observation"])
    return actor, critic


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    out = run_folder(cfg, "a2c")
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    vecnorm = VecNorm(in_keys=["observation"], decay=0.99999) if cfg.normalize else None
    env = make_env(cfg, cfg.num_envs, vecnorm, train=True)
    env.set_seed(cfg.seed)
    eval_vecnorm = VecNorm(in_keys=["observation"], decay=0.99999) if cfg.normalize else None
    eval_env = make_env(cfg, 1, eval_vecnorm, train=False)
    actor, critic = make_agent(cfg, env)
    advantage = GAE(gamma=cfg.gamma, lmbda=cfg.gae_lambda, value_network=critic, average_gae=False)
    loss_fn = A2CLoss(
        actor,
        critic,
        entropy_coeff=cfg.entropy_coeff,
        critic_coeff=cfg.critic_coeff,
        loss_critic_type="l2",
    )
    optim = torch.optim.RMSprop(loss_fn.parameters(), lr=cfg.lr, alpha=0.99, eps=1e-5)
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
    diagnostics = ScalarMeans()  # the loss's entropy, explained variance, ... between two logs

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
            logger.log_episodes(frames, batch)
            with torch.no_grad():
                advantage(batch)
            losses = loss_fn(batch.reshape(-1))
            diagnostics.add(losses)
            total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
            optim.zero_grad()
            total.backward()
            nn.utils.clip_grad_norm_(loss_fn.parameters(), cfg.max_grad_norm)
            optim.step()
            if frames >= next_eval:
                next_eval += cfg.eval_every
                logger.log(frames, loss=total.item(), **diagnostics.pop())
                copy_frozen_stats(vecnorm, eval_vecnorm)  # the training statistics, held fixed
                eval_return = evaluate(eval_env, actor, cfg.eval_episodes, seed=cfg.seed + 10_000)
                logger.log(frames, **{"eval/return": eval_return})
                keeper.evaluated(frames, eval_return, snapshot)
            stop = frames >= cfg.total_frames or eval_return >= cfg.target_return
            if frames >= next_ckpt or stop:
                while next_ckpt <= frames:
                    next_ckpt += cfg.checkpoint_every
                keeper.save(snapshot())
            logger.advance(batch.numel())
            if stop:
                break
    except KeyboardInterrupt:  # Ctrl-C: the final checkpoint below, then exit 130
        keeper.interrupted = True
    return finish_run(
        collector,
        logger,
        clock,
        out,
        algo="a2c",
        env=cfg.env,
        frames=frames,
        eval_return=eval_return,
        keeper=keeper,
        snapshot=snapshot,
    )


if __name__ == "__main__":
    main()
