"""SAC (Haarnoja et al., 2018, arXiv:1812.05905): twin soft Q-critics with Polyak-averaged
targets, a tanh-Gaussian actor and a learned temperature.

Defaults follow TorchRL's and CleanRL's MuJoCo settings (256x256 ReLU networks, Adam 3e-4,
batch 256, tau 0.005, one gradient step per frame), with 5k random frames before learning.
``--env`` also takes a native env as ``module:Class``; the third line below is the setting
that learns ``SatelliteEnv`` (docs/results.md).

    uv run recipes/sac.py                        # HalfCheetah-v5, 300k frames
    uv run recipes/sac.py --env Hopper-v5 --total-frames 1000000
    uv run recipes/sac.py --env rl_envs:SatelliteEnv --obs-norm --frame-skip 4 --hidden 64
    uv run recipes/sac.py --smoke                # a few seconds, end to end
    uv run recipes/sac.py --compile              # torch.compile the update's loss
    uv run recipes/sac.py --resume runs/sac/checkpoint.pt
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from _config import RunConfig, parse_config

# sac.py is also the base of crossq, redq, gail, cql, iql and make_dataset (its Config, envs
# and networks): its heavy imports live inside the functions, so importing it is instant
# and every one of those recipes answers --help before torch is imported.
if TYPE_CHECKING:
    import torch

    from rl_envs import TransformedEnv
    from rl_modules import ProbabilisticActor, ValueOperator


@dataclass
class Config(RunConfig):
    """Soft actor-critic on a task with continuous actions (Gymnasium id or native env)."""

    env: str = "HalfCheetah-v5"
    """Gymnasium id of the task (continuous actions), or "module:Class" of a native env."""
    total_frames: int = 300_000
    """Frames to collect in total."""
    frames_per_batch: int = 1_000
    """Frames collected between two rounds of gradient steps."""
    init_random_frames: int = 5_000
    """Frames of uniformly random actions before learning starts."""
    utd_ratio: float = 1.0
    """Gradient steps per collected frame."""
    batch_size: int = 256
    """Transitions per gradient step."""
    buffer_size: int = 1_000_000
    """Replay buffer capacity (transitions)."""
    lr: float = 3e-4
    """Adam learning rate of the actor, the critics and the temperature."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak step of the target critics."""
    alpha_init: float = 1.0
    """Initial temperature (learned towards entropy -dim(action))."""
    hidden: int = 256
    """Width of the two hidden layers of actor and critics."""
    obs_norm: bool = False
    """Standardise observations with the mean / std of obs_norm_frames random steps (then fixed)."""
    obs_norm_frames: int = 2_000
    """Random-action steps, on a separate env, that give the observation statistics."""
    frame_skip: int = 1
    """Env steps each action is held for (rewards summed); frames count the agent's steps."""
    compile: bool = False
    """torch.compile the loss of each update (forward and backward); on CPU it is slower."""

    SMOKE: ClassVar[dict[str, object]] = {
        "total_frames": 2_000,
        "frames_per_batch": 500,
        "init_random_frames": 1_000,
        "utd_ratio": 0.05,
        "buffer_size": 10_000,
        "eval_every": 2_000,
        "eval_episodes": 1,
        "checkpoint_every": 1_000,
    }


def make_env(
    cfg: Config, obs_stats: tuple[torch.Tensor, torch.Tensor] | None = None
) -> TransformedEnv:
    """``cfg.env`` (a Gymnasium id or a native ``module:Class``) with float observations.

    ``obs_stats`` (mean, std) adds an :class:`ObservationNorm` giving ``(obs - mean) / std``;
    ``cfg.frame_skip > 1`` repeats each action (:class:`FrameSkipTransform`), so an episode's
    return is still the sum of every env step's reward.
    """
    from _common import make_base_env

    from rl_envs import (
        Compose,
        DoubleToFloat,
        FrameSkipTransform,
        ObservationNorm,
        RewardSum,
        StepCounter,
        TransformedEnv,
    )

    skip = [FrameSkipTransform(cfg.frame_skip)] if cfg.frame_skip > 1 else []
    norm = [] if obs_stats is None else [ObservationNorm(*obs_stats, standard_normal=True)]
    return TransformedEnv(
        make_base_env(cfg.env),
        Compose(*skip, DoubleToFloat(), *norm, StepCounter(), RewardSum()),
    )


def observation_stats(cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std (floored at 1e-6) of the observations of ``cfg.obs_norm_frames`` random steps.

    Taken on a separate env seeded with ``cfg.seed + 20_000``, so that a resumed run gets the
    same statistics.
    """
    env = make_env(cfg)
    env.set_seed(cfg.seed + 20_000)
    steps = -(-cfg.obs_norm_frames // max(env.batch_size.numel(), 1))
    obs = env.rollout(steps, break_when_any_done=False)["observation"]
    obs = obs.reshape(-1, obs.shape[-1])
    return obs.mean(0), obs.std(0).clamp_min(1e-6)


def make_envs(cfg: Config) -> tuple[TransformedEnv, TransformedEnv]:
    """The training env (seeded with ``cfg.seed``) and the evaluation env.

    With ``cfg.obs_norm`` both standardise observations with the same
    :func:`observation_stats`.
    """
    obs_stats = observation_stats(cfg) if cfg.obs_norm else None
    env = make_env(cfg, obs_stats)
    env.set_seed(cfg.seed)
    return env, make_env(cfg, obs_stats)


def make_agent(cfg: Config, env: TransformedEnv) -> tuple[ProbabilisticActor, ValueOperator]:
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torch import nn

    from rl_modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator

    action_spec = env.action_spec
    obs_dim = env.observation_spec["observation"].shape[-1]
    act_dim = action_spec.shape[-1]
    actor_net = nn.Sequential(
        MLP(obs_dim, 2 * act_dim, num_cells=[cfg.hidden] * 2, activation_class=nn.ReLU),
        NormalParamExtractor(scale_mapping="biased_softplus_1.0", scale_lb=0.1),
    )
    actor = ProbabilisticActor(
        TensorDictModule(actor_net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        spec=action_spec,
        distribution_class=TanhNormal,
    )
    qvalue = ValueOperator(
        MLP(obs_dim + act_dim, 1, num_cells=[cfg.hidden] * 2, activation_class=nn.ReLU),
        in_keys=["observation", "action"],
        out_keys=["state_action_value"],
    )
    return actor, qvalue


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    import torch
    from _common import seed_everything
    from _off_policy import OffPolicyRun, train_off_policy
    from tensordict import TensorDictBase

    from rl_buffers import LazyTensorStorage, TensorDictReplayBuffer
    from rl_collectors import Collector
    from rl_objectives import SACLoss, SoftUpdate

    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    env, eval_env = make_envs(cfg)
    actor, qvalue = make_agent(cfg, env)
    loss_fn = SACLoss(
        actor,
        qvalue,
        num_qvalue_nets=2,
        loss_function="l2",
        alpha_init=cfg.alpha_init,
        action_spec=env.action_spec,
        delay_qvalue=True,
    )
    loss_fn.make_value_estimator(gamma=cfg.gamma)
    updater = SoftUpdate(loss_fn, tau=cfg.tau)
    optim_actor = torch.optim.Adam(loss_fn.actor_network_params.flatten_keys().values(), lr=cfg.lr)
    optim_critic = torch.optim.Adam(
        loss_fn.qvalue_network_params.flatten_keys().values(), lr=cfg.lr
    )
    optim_alpha = torch.optim.Adam([loss_fn.log_alpha], lr=cfg.lr)
    optims = (optim_actor, optim_critic, optim_alpha)
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(cfg.buffer_size), batch_size=cfg.batch_size
    )

    loss_step = torch.compile(loss_fn) if cfg.compile else loss_fn  # same parameters

    def update(sample: TensorDictBase) -> dict[str, torch.Tensor]:
        losses = loss_step(sample)
        total = losses["loss_actor"] + losses["loss_qvalue"] + losses["loss_alpha"]
        for optim in optims:
            optim.zero_grad()
        total.backward()  # each loss moves only its own parameters
        for optim in optims:
            optim.step()
        updater.step()
        return {
            "loss_actor": losses["loss_actor"],
            "loss_qvalue": losses["loss_qvalue"],
            "alpha": losses["alpha"],
            "entropy": losses["entropy"],
        }

    run = OffPolicyRun(
        algo="sac",
        collector=Collector(
            env,
            actor,
            frames_per_batch=cfg.frames_per_batch,
            total_frames=cfg.total_frames,
            init_random_frames=cfg.init_random_frames,
        ),
        buffer=buffer,
        update=update,
        num_updates=int(cfg.frames_per_batch * cfg.utd_ratio),
        eval_env=eval_env,
        eval_policy=actor,
        stateful={
            "loss": loss_fn,
            "optim_actor": optim_actor,
            "optim_critic": optim_critic,
            "optim_alpha": optim_alpha,
        },
    )
    return train_off_policy(cfg, run)


if __name__ == "__main__":
    main()
