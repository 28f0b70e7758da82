"""PPO (Schulman et al., 2017, arXiv:1707.06347) with GAE, clipping and minibatch epochs.

Defaults train InvertedDoublePendulum-v5 to a deterministic return above 9000.
Also tested on HalfCheetah-v5 and CartPole-v1 (``--env CartPole-v1``).

    uv run recipes/ppo.py                       # the default run
    uv run recipes/ppo.py --env HalfCheetah-v5 --total-frames 1000000
    uv run recipes/ppo.py --preset zoo-halfcheetah  # RL Zoo's tuned HalfCheetah setting, 1M frames
    uv run recipes/ppo.py --smoke               # a few seconds, end to end
    uv run recipes/ppo.py --kernels             # GAE from rl_kernels (Triton on GPU)
    uv run recipes/ppo.py --compile             # torch.compile the policy and the loss
    uv run recipes/ppo.py --resume runs/ppo/checkpoint.pt
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar

from _config import RunConfig, parse_config


@dataclass
class Config(RunConfig):
    """PPO with GAE on a Gymnasium task."""

    env: str = "InvertedDoublePendulum-v5"
    """Gymnasium id of the task (continuous or discrete actions)."""
    num_envs: int = 8
    """Envs stepped together (one Gymnasium vector env)."""
    total_frames: int = 2_000_000
    """Frames to collect in total."""
    frames_per_batch: int = 2048
    """Frames per collected batch (num_envs x steps)."""
    epochs: int = 10
    """Passes over each batch."""
    minibatch_size: int = 512
    """Transitions per gradient step."""
    lr: float = 3e-4
    """Adam learning rate (annealed linearly to 0 when anneal_lr)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly over the run."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    recompute_advantage: bool = True
    """Recompute GAE with the current critic before every epoch (TorchRL's examples); false
    computes it once per batch, before the first epoch (SB3, CleanRL)."""
    clip_epsilon: float = 0.2
    """PPO ratio clipping."""
    entropy_coeff: float = 0.0
    """Entropy bonus coefficient."""
    critic_coeff: float = 0.5
    """Weight of the critic loss."""
    max_grad_norm: float = 0.5
    """Gradient clipping norm."""
    hidden: int = 64
    """Width of the two hidden layers of actor and critic."""
    activation: str = "tanh"
    """Hidden activation of actor and critic: "tanh" or "relu"."""
    ortho_init: bool = True
    """Orthogonal weights (small last layers); false keeps torch's default init."""
    tanh_squash: bool = True
    """Continuous actions from a tanh-squashed Gaussian (True), or from a Gaussian whose
    samples the env clips to the action bounds (False: SB3's PPO, CleanRL)."""
    log_std_init: float = 0.0
    """Initial log standard deviation of continuous actions (state-independent)."""
    reward_norm: bool = False
    """Scale training rewards by the running std of the discounted return (NormalizeReward)."""
    obs_clip: float = float("inf")
    """Clip normalised observations to [-obs_clip, obs_clip]."""
    kernels: bool = False
    """Compute advantages with rl_kernels' drop-in GAE (Triton on CUDA, fast torch on CPU)."""
    compile: bool = False
    """torch.compile the policy and each minibatch's loss; fused Adam (the first batch pays)."""
    eval_every: int = 40_960
    eval_episodes: int = 3
    target_return: float = 9300.0
    checkpoint_every: int = 200_000

    SMOKE: ClassVar[dict[str, object]] = {
        "total_frames": 4096,
        "frames_per_batch": 1024,
        "eval_every": 2048,
        "eval_episodes": 1,
        "checkpoint_every": 2048,
        "epochs": 2,
    }
    PRESETS: ClassVar[dict[str, dict[str, object]]] = {
        # RL Baselines3 Zoo's tuned PPO for HalfCheetah (hyperparams/ppo.yml, 5819 at 1M frames):
        # VecNormalize (observations clipped at 10, rewards by return), ReLU 256x256 nets
        # without orthogonal init, log-std -2, constant learning rate, and SB3's PPO itself:
        # a Gaussian clipped to the bounds by the env, GAE computed once per batch.
        "zoo-halfcheetah": {
            "env": "HalfCheetah-v5",
            "num_envs": 1,
            "total_frames": 1_000_000,
            "frames_per_batch": 512,
            "minibatch_size": 64,
            "epochs": 20,
            "lr": 2.0633e-05,
            "anneal_lr": False,
            "gamma": 0.98,
            "gae_lambda": 0.92,
            "recompute_advantage": False,
            "clip_epsilon": 0.1,
            "entropy_coeff": 0.000401762,
            "critic_coeff": 0.58096,
            "max_grad_norm": 0.8,
            "hidden": 256,
            "activation": "relu",
            "ortho_init": False,
            "log_std_init": -2.0,
            "tanh_squash": False,
            "reward_norm": True,
            "obs_clip": 10.0,
            "eval_every": 51_200,
            "eval_episodes": 5,
            "target_return": float("inf"),
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
    make_base_env,
    normalized_env,
    orthogonal_init,
    run_counters,
    run_folder,
    seed_everything,
    stochastic_actor,
)
from tensordict import TensorDictBase
from torch import nn

from rl_buffers import LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement
from rl_collectors import Collector
from rl_envs import TransformedEnv, VecNorm
from rl_modules import MLP, ProbabilisticActor, ValueOperator
from rl_objectives import GAE, ClipPPOLoss


def gae_class(kernels: bool) -> type:
    """rl_objectives' GAE, or rl_kernels' drop-in (same arguments, same keys)."""
    if kernels:
        from rl_kernels import GAE as KernelGAE  # the one import that changes

        return KernelGAE
    return GAE


def epoch_minibatches(
    batch: TensorDictBase,
    advantage: Callable[[TensorDictBase], object],
    buffer: ReplayBuffer,
    epochs: int,
    recompute_advantage: bool,
) -> Iterator[TensorDictBase]:
    """Every minibatch of ``epochs`` passes over ``batch``, GAE written before each pass or
    only before the first.

    >>> from tensordict import TensorDict
    >>> rb = ReplayBuffer(storage=LazyTensorStorage(4), sampler=SamplerWithoutReplacement(),
    ...                   batch_size=2)
    >>> td = TensorDict({"x": torch.zeros(4)}, [4])
    >>> len(list(epoch_minibatches(td, lambda b: b, rb, epochs=3, recompute_advantage=False)))
    6
    """
    for epoch in range(epochs):
        if epoch == 0 or recompute_advantage:
            with torch.no_grad():
                advantage(batch)
            buffer.extend(batch.reshape(-1))
        yield from buffer


def make_env(cfg: Config, num_envs: int, vecnorm: VecNorm, train: bool) -> TransformedEnv:
    """The task with normalised observations; training rewards are normalised after RewardSum,
    so logged returns stay raw (evaluation envs never scale rewards)."""
    # Discrete actions as indices (a Categorical spec), as the Categorical policy samples them.
    # --env rl_envs:HalfCheetahEnv builds the native batched MuJoCo task instead of Gymnasium's.
    base = make_base_env(cfg.env, num_envs, categorical_action_encoding=True)
    return normalized_env(
        base,
        vecnorm,
        obs_clip=cfg.obs_clip,
        reward_gamma=cfg.gamma if train and cfg.reward_norm else None,
        clip_actions=not cfg.tanh_squash,
    )


def make_agent(cfg: Config, env: TransformedEnv) -> tuple[ProbabilisticActor, ValueOperator]:
    action_spec = env.action_spec_unbatched
    obs_dim = env.observation_spec["observation"].shape[-1]
    discrete = not action_spec.dtype.is_floating_point
    n_out = action_spec.space.n if discrete else action_spec.shape[-1]
    activations = {"tanh": nn.Tanh, "relu": nn.ReLU}
    if cfg.activation not in activations:
        raise ValueError(
            f"--activation must be one of {sorted(activations)}, got {cfg.activation!r}"
        )
    act = activations[cfg.activation]
    body = MLP(obs_dim, n_out, num_cells=[cfg.hidden] * 2, activation_class=act)
    critic_body = MLP(obs_dim, 1, num_cells=[cfg.hidden] * 2, activation_class=act)
    if cfg.ortho_init:
        orthogonal_init(body, last_gain=0.01)
        orthogonal_init(critic_body, last_gain=1.0)
    actor = stochastic_actor(
        body, action_spec, tanh_squash=cfg.tanh_squash, log_std_init=cfg.log_std_init
    )
    critic = ValueOperator(critic_body, in_keys=["observation"])
    return actor, critic


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    out = run_folder(cfg, "ppo")
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    vecnorm = VecNorm(in_keys=["observation"], decay=0.99999)
    env = make_env(cfg, cfg.num_envs, vecnorm, train=True)
    env.set_seed(cfg.seed)
    eval_vecnorm = VecNorm(in_keys=["observation"], decay=0.99999)
    eval_env = make_env(cfg, 1, eval_vecnorm, train=False)
    actor, critic = make_agent(cfg, env)
    if cfg.compile:
        actor.compile()  # in place: the collector's policy, state_dict names unchanged
    advantage = gae_class(cfg.kernels)(
        gamma=cfg.gamma, lmbda=cfg.gae_lambda, value_network=critic, average_gae=False
    )
    loss_fn = ClipPPOLoss(
        actor,
        critic,
        clip_epsilon=cfg.clip_epsilon,
        entropy_coeff=cfg.entropy_coeff,
        critic_coeff=cfg.critic_coeff,
        loss_critic_type="l2",
        normalize_advantage=True,
    )
    loss_step = torch.compile(loss_fn) if cfg.compile else loss_fn  # same parameters
    # --compile also fuses Adam's step and the gradient norm into single kernels (the same maths)
    fast = True if cfg.compile else None
    optim = torch.optim.Adam(loss_fn.parameters(), lr=cfg.lr, eps=1e-5, fused=fast)
    n_updates = -(-cfg.total_frames // cfg.frames_per_batch)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optim, lambda i: max(1.0 - i / n_updates, 0.0) if cfg.anneal_lr else 1.0
    )
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
        schedule.load_state_dict(state["schedule"])
        collector.load_state_dict(state["collector"])  # the env with its VecNorm statistics
    frames, wall, eval_return, next_eval, next_ckpt = run_counters(cfg, state)
    logger = RunLogger(out, cfg.total_frames, frames, cfg.target_return)
    clock = Stopwatch(wall)
    diagnostics = ScalarMeans()  # the loss's clip fraction, KL, explained variance, entropy, ...

    def snapshot() -> dict[str, object]:
        return {
            "loss": loss_fn.state_dict(),
            "optim": optim.state_dict(),
            "schedule": schedule.state_dict(),
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
            vecnorm.frozen = True  # statistics stay fixed while the batch is learned from
            passes = epoch_minibatches(
                batch, advantage, buffer, cfg.epochs, cfg.recompute_advantage
            )
            for minibatch in passes:
                losses = loss_step(minibatch)
                diagnostics.add(losses)
                total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
                optim.zero_grad()
                total.backward()
                nn.utils.clip_grad_norm_(loss_fn.parameters(), cfg.max_grad_norm, foreach=fast)
                optim.step()
            vecnorm.frozen = False
            schedule.step()
            collector.update_policy_weights_()
            logger.log(frames, loss=total.item(), lr=schedule.get_last_lr()[0], **diagnostics.pop())
            if frames >= next_eval:
                next_eval += cfg.eval_every
                copy_frozen_stats(vecnorm, eval_vecnorm)
                eval_return = evaluate(eval_env, actor, cfg.eval_episodes, seed=cfg.seed + 10_000)
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
        algo="ppo",
        env=cfg.env,
        frames=frames,
        eval_return=eval_return,
        keeper=keeper,
        snapshot=snapshot,
    )


if __name__ == "__main__":
    main()
