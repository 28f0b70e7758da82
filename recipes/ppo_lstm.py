"""Recurrent PPO (Schulman et al., 2017, arXiv:1707.06347) with an LSTM on a partially observed task.

CartPole-v1 with its two velocities masked out (an ``ObservationNorm`` with a 0/1 scale
zeroes them, and scales the positions): from positions alone the task needs memory. Actor and critic share one
LSTM (``LSTMModule`` from rl_kernels, or rl_modules' with ``--modules rl_modules``: the
same keys, the same weights, the same numbers); the envs carry its state, and each
epoch replays whole ``[envs, steps]`` sequences in sequence mode from the stored state.

    uv run recipes/ppo_lstm.py                        # the default run
    uv run recipes/ppo_lstm.py --modules rl_modules   # the same with rl_modules' LSTMModule
    uv run recipes/ppo_lstm.py --smoke                # a few seconds, end to end
    uv run recipes/ppo_lstm.py --resume runs/ppo_lstm/checkpoint.pt
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, ClassVar

from _config import RunConfig, parse_config


@dataclass
class Config(RunConfig):
    """Recurrent PPO on CartPole-v1 without velocities."""

    env: str = "CartPole-v1"
    """Gymnasium id of the task (discrete actions)."""
    obs_scale: str = "0.5,0,5,0"
    """Per-entry observation scale; 0 hides an entry (CartPole: x and angle to about unit range, velocities hidden)."""
    reward_scale: float = 0.1
    """Scale of the training rewards (keeps the shared LSTM's value loss near the policy loss)."""
    modules: str = "rl_kernels"
    """Package of LSTMModule / set_recurrent_mode: rl_kernels or rl_modules."""
    num_envs: int = 16
    """Envs stepped together (one Gymnasium vector env)."""
    total_frames: int = 500_000
    """Frames to collect in total."""
    frames_per_batch: int = 2048
    """Frames per collected batch (num_envs x steps: the sequence length is steps)."""
    epochs: int = 4
    """Passes over each batch."""
    num_minibatches: int = 4
    """Minibatches per epoch, each a group of whole env sequences."""
    lr: float = 1e-3
    """Adam learning rate (annealed linearly to 0 when anneal_lr)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly over the run."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_epsilon: float = 0.2
    """PPO ratio clipping."""
    entropy_coeff: float = 0.01
    """Entropy bonus coefficient."""
    critic_coeff: float = 0.5
    """Weight of the critic loss."""
    max_grad_norm: float = 0.5
    """Gradient clipping norm."""
    hidden: int = 64
    """LSTM hidden size and width of the heads."""
    eval_every: int = 20_480
    eval_episodes: int = 3
    target_return: float = 500.0
    checkpoint_every: int = 100_000

    SMOKE: ClassVar[dict[str, object]] = {
        "total_frames": 512,
        "frames_per_batch": 256,
        "num_envs": 4,
        "epochs": 1,
        "num_minibatches": 2,
        "eval_every": 512,
        "eval_episodes": 1,
        "checkpoint_every": 256,
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
    counters_state,
    evaluate,
    finish_run,
    load_checkpoint,
    run_counters,
    run_folder,
    seed_everything,
)
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn
from torch.distributions import Categorical

from rl_collectors import Collector
from rl_envs import (
    Compose,
    DoubleToFloat,
    GymEnv,
    InitTracker,
    ObservationNorm,
    RewardScaling,
    RewardSum,
    StepCounter,
    TransformedEnv,
)
from rl_modules import MLP, ProbabilisticActor, ValueOperator
from rl_objectives import GAE, ClipPPOLoss


def recurrent_api(cfg: Config) -> tuple[type, Any]:
    """``(LSTMModule, set_recurrent_mode)`` of the package chosen by ``--modules``."""
    if cfg.modules not in ("rl_kernels", "rl_modules"):
        raise ValueError(f"--modules must be rl_kernels or rl_modules, got {cfg.modules!r}.")
    package = importlib.import_module(cfg.modules)
    return package.LSTMModule, package.set_recurrent_mode


def make_env(cfg: Config, num_envs: int, lstm: nn.Module, train: bool = True) -> TransformedEnv:
    kwargs = {"categorical_action_encoding": True}
    base = (
        GymEnv(cfg.env, num_envs=num_envs, **kwargs) if num_envs > 1 else GymEnv(cfg.env, **kwargs)
    )
    scale = torch.tensor([float(v) for v in cfg.obs_scale.split(",")])
    mask = ObservationNorm(loc=0.0, scale=scale, in_keys=["observation"])
    env = TransformedEnv(base, Compose(DoubleToFloat(), mask, StepCounter(), RewardSum()))
    if train:  # after RewardSum: the logged episode returns stay in the task's units
        env.append_transform(RewardScaling(loc=0.0, scale=cfg.reward_scale))
    env.append_transform(InitTracker())
    env.append_transform(lstm.make_tensordict_primer())
    return env


def make_agent(
    cfg: Config, obs_dim: int, n_actions: int, action_spec: Any
) -> tuple[nn.Module, ProbabilisticActor, TensorDictSequential]:
    """The shared LSTM, the actor (LSTM -> logits -> Categorical) and the critic (LSTM -> value)."""
    lstm_class, _ = recurrent_api(cfg)
    lstm = lstm_class(
        input_size=obs_dim, hidden_size=cfg.hidden, in_key="observation", out_key="embed"
    )
    head = MLP(cfg.hidden, n_actions, num_cells=[cfg.hidden], activation_class=nn.Tanh)
    value_head = MLP(cfg.hidden, 1, num_cells=[cfg.hidden], activation_class=nn.Tanh)
    for mlp, gain in ((head, 0.01), (value_head, 1.0)):
        linears = [m for m in mlp.modules() if isinstance(m, nn.Linear)]
        for layer in linears:
            nn.init.orthogonal_(layer.weight, gain=gain if layer is linears[-1] else 2**0.5)
            nn.init.zeros_(layer.bias)
    actor = ProbabilisticActor(
        TensorDictSequential(lstm, TensorDictModule(head, ["embed"], ["logits"])),
        in_keys=["logits"],
        distribution_class=Categorical,
        spec=action_spec,
        return_log_prob=True,
    )
    critic = TensorDictSequential(lstm, ValueOperator(value_head, in_keys=["embed"]))
    return lstm, actor, critic


def add_values(batch: TensorDictBase, critic: nn.Module, lstm: nn.Module, mode: Any) -> None:
    """Write ``state_value`` and ``("next", "state_value")`` for a ``[envs, steps]`` batch.

    ``V(s[t+1])`` is the next row entry, except after a done step and at the last step,
    where the next observation is evaluated one step on from the state the policy wrote.
    """
    state_keys = list(lstm.state_keys)
    with torch.no_grad():
        with mode(True):
            seq = batch.select("observation", "is_init", *state_keys).clone(False)
            value = critic(seq)["state_value"]
        done = batch["next", "done"].squeeze(-1)
        last = torch.zeros_like(done)
        last[:, -1] = True
        ends = done | last
        nxt = batch["next"].select("observation", *state_keys)[ends]
        with mode(False):
            end_value = critic(nxt)["state_value"]
    next_value = value.roll(-1, dims=1)
    next_value[ends] = end_value
    batch.set("state_value", value)
    batch.set(("next", "state_value"), next_value)


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    out = run_folder(cfg, "ppo_lstm")
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    _, mode = recurrent_api(cfg)
    probe = GymEnv(cfg.env, categorical_action_encoding=True)
    obs_dim = probe.observation_spec["observation"].shape[-1]
    action_spec = probe.action_spec_unbatched
    probe.close()
    lstm, actor, critic = make_agent(cfg, obs_dim, action_spec.space.n, action_spec)
    env = make_env(cfg, cfg.num_envs, lstm)
    env.set_seed(cfg.seed)
    eval_env = make_env(cfg, 1, lstm, train=False)
    advantage = GAE(gamma=cfg.gamma, lmbda=cfg.gae_lambda, value_network=None)
    loss_fn = ClipPPOLoss(
        actor,
        critic,
        clip_epsilon=cfg.clip_epsilon,
        entropy_coeff=cfg.entropy_coeff,
        critic_coeff=cfg.critic_coeff,
        loss_critic_type="l2",
        normalize_advantage=True,
    )
    optim = torch.optim.Adam(loss_fn.parameters(), lr=cfg.lr, eps=1e-5)
    n_updates = -(-cfg.total_frames // cfg.frames_per_batch)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optim, lambda i: max(1.0 - i / n_updates, 0.0) if cfg.anneal_lr else 1.0
    )
    collector = Collector(
        env, actor, frames_per_batch=cfg.frames_per_batch, total_frames=cfg.total_frames
    )

    state = load_checkpoint(cfg.resume, cfg) if cfg.resume else None
    if state is not None:
        loss_fn.load_state_dict(state["loss"])
        optim.load_state_dict(state["optim"])
        schedule.load_state_dict(state["schedule"])
        collector.load_state_dict(state["collector"])
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
            add_values(batch, critic, lstm, mode)
            advantage(batch)
            envs = batch.shape[0]
            for _ in range(cfg.epochs):
                for rows in torch.randperm(envs).chunk(cfg.num_minibatches):
                    with mode(True):
                        losses = loss_fn(batch[rows])
                    diagnostics.add(losses)
                    total = (
                        losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
                    )
                    optim.zero_grad()
                    total.backward()
                    nn.utils.clip_grad_norm_(loss_fn.parameters(), cfg.max_grad_norm)
                    optim.step()
            schedule.step()
            collector.update_policy_weights_()
            logger.log(frames, loss=total.item(), lr=schedule.get_last_lr()[0], **diagnostics.pop())
            if frames >= next_eval:
                next_eval += cfg.eval_every
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
        algo="ppo_lstm",
        env=f"{cfg.env} (positions only)",
        frames=frames,
        eval_return=eval_return,
        keeper=keeper,
        snapshot=snapshot,
    )


if __name__ == "__main__":
    main()
