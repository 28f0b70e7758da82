"""Dreamer (Hafner et al., 2019, arXiv:1912.01603) and DreamerV3 (Hafner et al., 2023,
arXiv:2301.04104): learn a recurrent world model from replayed sequences, then train the actor
and the critic on trajectories imagined in its latent space.

Each round collects one episode with the current actor (filtering observations through the
RSSM), then runs ``updates_per_batch`` gradient steps on ``[batch_size, batch_length]`` slices
that never cross episodes (``SliceSampler``): world model, then actor (backpropagating the
lambda-returns of ``imagination_horizon`` imagined steps through the dynamics, in a
``DreamerEnv``), then critic. ``--version v3`` swaps in DreamerV3's parts: 32x32-style discrete
latents with unimix, KL balancing with free bits, symlog reconstruction, two-hot reward and
critic heads, a continuation head (the probability of not terminating, trained with BCE and
used as the per-step discount of the imagined returns; ``--continuation`` adds it to v1) and a
slow (EMA) critic regulariser. ``--device cuda`` trains on a GPU (envs and replay stay on CPU).

    uv run recipes/dreamer.py                                  # v1, Pendulum (state), 50k frames
    uv run recipes/dreamer.py --version v3
    uv run recipes/dreamer.py --env cartpole-swingup --pixels  # DM Control from 64x64 pixels
    uv run recipes/dreamer.py --smoke
    MUJOCO_GL=egl uv run recipes/dreamer.py --env cartpole-swingup --pixels --version v3 --device cuda
    uv run recipes/dreamer.py --resume runs/dreamer/checkpoint.pt
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from _config import RunConfig, parse_config


@dataclass
class Config(RunConfig):
    """Dreamer / DreamerV3 on a state-based or pixel-based continuous-control task."""

    version: str = "v1"
    """'v1' (Gaussian RSSM, Dreamer) or 'v3' (discrete latents, symlog, two-hot: DreamerV3)."""
    env: str = "pendulum"
    """'pendulum' (pure-torch Pendulum-v1, state) or a DM Control 'domain-task' (e.g. cartpole-swingup)."""
    pixels: bool = False
    """Learn from 64x64 RGB pixels (DM Control tasks only), stored as uint8."""
    action_repeat: int = 2
    """DM Control frame skip (frames = env steps x action_repeat); Pendulum uses 1."""
    total_frames: int = 50_000
    """Env frames to collect in total."""
    init_random_frames: int = 1_000
    """Frames of uniformly random actions before learning starts (whole episodes)."""
    updates_per_batch: int = 100
    """Gradient steps after each collected episode."""
    batch_size: int = 16
    """Sequences per gradient step."""
    batch_length: int = 50
    """Steps per sequence."""
    imagination_horizon: int = 15
    """Imagined steps per start state."""
    state_dim: int = 30
    """Size of the Gaussian stochastic state (v1)."""
    num_categoricals: int = 16
    """Categorical variables of the discrete state (v3; the paper uses 32)."""
    num_classes: int = 16
    """Classes per categorical variable (v3; the paper uses 32)."""
    rnn_hidden_dim: int = 200
    """Size of the deterministic belief (GRU state)."""
    hidden_dim: int = 200
    """Width of the MLPs (encoder, decoder, heads, RSSM projections)."""
    world_model_lr: float = 6e-4
    """Adam learning rate of the world model."""
    actor_lr: float = 8e-5
    """Adam learning rate of the actor."""
    value_lr: float = 8e-5
    """Adam learning rate of the critic."""
    grad_clip: float = 100.0
    """Gradient-norm clip of each optimizer."""
    gamma: float = 0.99
    """Discount of the imagined returns."""
    lmbda: float = 0.95
    """Lambda of the imagined lambda-returns."""
    free_nats: float = 3.0
    """KL floor: free nats (v1) / free bits (v3 uses min(free_nats, 1.0))."""
    continuation: bool = False
    """v1: add a continuation head (BCE on 1 - terminated; its probability discounts the
    imagined returns). v3 always has one."""
    device: str = "cpu"
    """Where the networks train: 'cpu' or 'cuda' ('cuda:N'); envs and replay stay on CPU."""
    buffer_size: int = 1_000_000
    """Replay capacity (steps)."""
    eval_every: int = 5_000
    eval_episodes: int = 1
    checkpoint_every: int = 10_000

    SMOKE: ClassVar[dict[str, object]] = {
        "total_frames": 600,
        "init_random_frames": 400,
        "updates_per_batch": 2,
        "batch_size": 4,
        "batch_length": 10,
        "imagination_horizon": 5,
        "rnn_hidden_dim": 32,
        "hidden_dim": 32,
        "state_dim": 8,
        "num_categoricals": 4,
        "num_classes": 4,
        "eval_every": 600,
        "checkpoint_every": 400,
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
    load_buffer_state_dict,
    load_checkpoint,
    plot_learning_curve,
    run_counters,
    run_folder,
    seed_everything,
    write_summary,
)
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import (
    InteractionType,
    TensorDictModule,
    TensorDictSequential,
    set_interaction_type,
)
from torch import nn

from rl_buffers import LazyTensorStorage, SliceSampler, TensorDictReplayBuffer
from rl_envs import DMControlEnv, DreamerEnv, PendulumEnv
from rl_modules import (
    MLP,
    ContinuationHead,
    DreamerActor,
    ObsDecoder,
    ObsEncoder,
    ProbabilisticActor,
    RSSMPosterior,
    RSSMPosteriorV3,
    RSSMPrior,
    RSSMPriorV3,
    RSSMRollout,
    RSSMRolloutV3,
    SymExpTwoHot,
    TanhNormal,
    WorldModelWrapper,
)
from rl_objectives import (
    DreamerActorLoss,
    DreamerModelLoss,
    DreamerV3ActorLoss,
    DreamerV3ModelLoss,
    DreamerV3ValueLoss,
    DreamerValueLoss,
    SoftUpdate,
    ValueEstimators,
)

# ---------------------------------------------------------------------------- environment


def resolve_device(name: str) -> torch.device:
    """``torch.device(name)`` for 'cpu' / 'cuda[:N]', with a clear error when CUDA is absent."""
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"--device must be 'cpu' or 'cuda' ('cuda:N'), got {name!r}.") from err
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"--device must be 'cpu' or 'cuda' ('cuda:N'), got {name!r}.")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"--device {name} was asked for, but torch.cuda.is_available() is False (torch "
                f"{torch.__version__}, built with CUDA {torch.version.cuda}). Run on a machine "
                "with an NVIDIA GPU and a CUDA build of torch, or pass --device cpu."
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise RuntimeError(
                f"--device {name}: only {torch.cuda.device_count()} CUDA device(s) are visible."
            )
    return device


class Task:
    """The real env, its observation key, and how to turn an observation into a float tensor."""

    def __init__(self, cfg: Config) -> None:
        self.pixels = cfg.pixels
        if cfg.env == "pendulum":
            if cfg.pixels:
                raise ValueError("--pixels needs a DM Control task (e.g. --env cartpole-swingup).")
            self.env: Any = PendulumEnv()
            self.repeat = 1
        else:
            domain, task = cfg.env.split("-", 1)
            render = {"height": 64, "width": 64, "camera_id": 0}
            self.env = DMControlEnv(
                domain,
                task,
                from_pixels=cfg.pixels,
                pixels_only=True,
                frame_skip=cfg.action_repeat,
                render_kwargs=render,
            )
            self.repeat = cfg.action_repeat
        self.key = "pixels" if cfg.pixels else "observation"
        obs_spec = self.env.observation_spec
        self.state_keys = [k for k in obs_spec.keys(True, True) if k != "pixels"]
        if cfg.pixels:
            self.obs_shape = (3, 64, 64)
        else:
            self.obs_shape = (sum(obs_spec[k].shape.numel() for k in self.state_keys),)
        self.env_action_dtype = self.env.action_spec.dtype
        # the networks act in float32; DM Control's actions are float64 (cast at the env)
        self.action_spec = self.env.action_spec.to(torch.float32)

    def observe(self, td: TensorDictBase) -> torch.Tensor:
        """The stored observation: uint8 HWC pixels, or the float32 state vector."""
        if self.pixels:
            return td.get("pixels")
        parts = [td.get(k).reshape(-1).to(torch.float32) for k in self.state_keys]
        return torch.cat(parts, -1)

    def to_float(self, obs: torch.Tensor) -> torch.Tensor:
        """What the networks see: pixels in [-0.5, 0.5] CHW, states unchanged."""
        if not self.pixels:
            return obs
        return obs.movedim(-1, -3).to(torch.float32) / 255.0 - 0.5


# ---------------------------------------------------------------------------- agent


class TwoHotCritic(nn.Module):
    """DreamerV3's critic / reward head: logits over 255 symexp bins and their decoded mean."""

    def __init__(self, in_features: int, hidden: int) -> None:
        super().__init__()
        self.net = MLP(in_features, 255, num_cells=[hidden, hidden], activation_class=nn.SiLU)
        nn.init.zeros_(self.net[-1].weight)  # start predicting 0 (the paper's zero init)
        nn.init.zeros_(self.net[-1].bias)
        self.two_hot = SymExpTwoHot(255)

    def forward(self, *latents: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.net(*latents)
        return self.two_hot(logits), logits


def build_agent(cfg: Config, task: Task, device: torch.device | None = None) -> dict[str, Any]:
    v3 = cfg.version == "v3"
    if cfg.version not in ("v1", "v3"):
        raise ValueError(f"--version must be 'v1' or 'v3', got {cfg.version!r}.")
    device = torch.device("cpu") if device is None else device
    act_dim = task.action_spec.shape[-1]
    h, b = cfg.hidden_dim, cfg.rnn_hidden_dim
    s = cfg.num_categoricals * cfg.num_classes if v3 else cfg.state_dim
    act = nn.SiLU if v3 else nn.ELU
    nxt, key = "next", task.key
    if task.pixels:
        enc_net: nn.Module = ObsEncoder(channels=32, in_channels=3)
        embed = 32 * 8 * 2 * 2
        dec_net: nn.Module = ObsDecoder(channels=32, latent_dim=s + b)
    else:
        embed = h
        enc_net = MLP(task.obs_shape[0], embed, num_cells=[h, h], activation_class=act)
        dec_net = MLP(s + b, task.obs_shape[0], num_cells=[h, h], activation_class=act)
    encoder = TensorDictModule(enc_net, in_keys=[(nxt, key)], out_keys=[(nxt, "encoded_latents")])
    decoder = TensorDictModule(
        dec_net, in_keys=[(nxt, "state"), (nxt, "belief")], out_keys=[(nxt, f"reco_{key}")]
    )
    if v3:
        kw = {"num_categoricals": cfg.num_categoricals, "num_classes": cfg.num_classes}
        prior_net: nn.Module = RSSMPriorV3(
            hidden_dim=h, rnn_hidden_dim=b, action_dim=act_dim, unimix=0.01, **kw
        )
        post_net: nn.Module = RSSMPosteriorV3(
            hidden_dim=h, rnn_hidden_dim=b, obs_embed_dim=embed, unimix=0.01, **kw
        )
        prior_out = [(nxt, "prior_logits"), (nxt, "state"), (nxt, "belief")]
        post_out = [(nxt, "posterior_logits"), (nxt, "state")]
        imag_out = ["_", "state", "belief"]
        rollout_cls: type = RSSMRolloutV3
        reward_net: nn.Module = TwoHotCritic(s + b, h)
        reward_train_out = [(nxt, "reward"), (nxt, "reward_logits")]
        reward_imag_out = ["reward", "_"]
        value_net: nn.Module = TwoHotCritic(s + b, h)
        value_out = ["state_value", "state_value_logits"]
    else:
        prior_net = RSSMPrior(None, hidden_dim=h, rnn_hidden_dim=b, state_dim=s, action_dim=act_dim)
        post_net = RSSMPosterior(hidden_dim=h, state_dim=s, rnn_hidden_dim=b, obs_embed_dim=embed)
        prior_out = [(nxt, "prior_mean"), (nxt, "prior_std"), "_", (nxt, "belief")]
        post_out = [(nxt, "posterior_mean"), (nxt, "posterior_std"), (nxt, "state")]
        imag_out = ["_", "_", "state", "belief"]
        rollout_cls = RSSMRollout
        reward_net = MLP(s + b, 1, num_cells=[h, h], activation_class=act)
        reward_train_out = [(nxt, "reward")]
        reward_imag_out = ["reward"]
        value_net = MLP(s + b, 1, num_cells=[h, h, h], activation_class=act)
        value_out = ["state_value"]
    prior = TensorDictModule(prior_net, in_keys=["state", "belief", "action"], out_keys=prior_out)
    posterior = TensorDictModule(
        post_net, in_keys=[(nxt, "belief"), (nxt, "encoded_latents")], out_keys=post_out
    )
    latents = [(nxt, "state"), (nxt, "belief")]
    heads: nn.Module = TensorDictModule(reward_net, in_keys=latents, out_keys=reward_train_out)
    continuation = None
    if v3 or cfg.continuation:
        cont_net = ContinuationHead(s + b, depth=2, num_cells=h, activation_class=act)
        cont_out = [(nxt, "continue_pred"), (nxt, "continue_prob")]
        heads = TensorDictSequential(
            heads, TensorDictModule(cont_net, in_keys=latents, out_keys=cont_out)
        )
        continuation = TensorDictModule(
            cont_net, in_keys=["state", "belief"], out_keys=["continue_pred", "continuation"]
        )
    world_model = WorldModelWrapper(
        TensorDictSequential(encoder, rollout_cls(prior, posterior), decoder), heads
    )
    world_model.to(device)
    imagination = DreamerEnv(
        WorldModelWrapper(
            TensorDictModule(prior_net, in_keys=["state", "belief", "action"], out_keys=imag_out),
            TensorDictModule(reward_net, in_keys=["state", "belief"], out_keys=reward_imag_out),
        ),
        prior_shape=(s,),
        belief_shape=(b,),
        device=device,
    )
    imagination.set_specs_from_env(task.env)
    imagination.action_spec_unbatched = task.action_spec
    imagination.reward_spec_unbatched = imagination.reward_spec_unbatched.to(torch.float32)
    actor = ProbabilisticActor(
        TensorDictModule(
            DreamerActor(act_dim, depth=2, num_cells=h, activation_class=act),
            in_keys=["state", "belief"],
            out_keys=["loc", "scale"],
        ),
        in_keys=["loc", "scale"],
        spec=task.action_spec.to(device),
        distribution_class=TanhNormal,
        return_log_prob=True,
    )
    value = TensorDictModule(value_net, in_keys=["state", "belief"], out_keys=value_out)
    with torch.no_grad():  # materialise the lazy layers (DreamerActor's first Linear)
        actor(TensorDict(state=torch.zeros(1, s), belief=torch.zeros(1, b), batch_size=[1]))
    actor.to(device)
    value.to(device)
    return {
        "world_model": world_model,
        "imagination": imagination,
        "actor": actor,
        "value": value,
        "encoder": encoder,
        "prior": prior_net,
        "posterior": post_net,
        "latent_dims": (s, b),
        "continuation": continuation,
        "device": device,
    }


def build_losses(cfg: Config, agent: dict[str, Any], task: Task) -> dict[str, Any]:
    key = task.key
    if cfg.version == "v3":
        model_loss: Any = DreamerV3ModelLoss(
            agent["world_model"],
            kl_mode="separate",
            lambda_dynamic=0.5,
            lambda_representation=0.1,
            unimix=0.01,
            free_bits=min(cfg.free_nats, 1.0),
            lambda_continue=1.0,
        )
        actor_loss: Any = DreamerV3ActorLoss(
            agent["actor"],
            agent["value"],
            agent["imagination"],
            continuation_model=agent["continuation"],
            imagination_horizon=cfg.imagination_horizon,
        )
        value_loss: Any = DreamerV3ValueLoss(
            agent["value"], value_loss="two_hot", slow_critic_regularization=1.0
        )
    else:
        model_loss = DreamerModelLoss(
            agent["world_model"],
            free_nats=cfg.free_nats,
            lambda_continue=1.0 if cfg.continuation else 0.0,
        )
        actor_loss = DreamerActorLoss(
            agent["actor"],
            agent["value"],
            agent["imagination"],
            continuation_model=agent["continuation"],
            imagination_horizon=cfg.imagination_horizon,
        )
        value_loss = DreamerValueLoss(agent["value"], gamma=cfg.gamma)
    model_loss.set_keys(pixels=key, reco_pixels=f"reco_{key}")
    actor_loss.make_value_estimator(ValueEstimators.TDLambda, gamma=cfg.gamma, lmbda=cfg.lmbda)
    for loss in (model_loss, actor_loss, value_loss):  # their buffers (bins, statistics)
        loss.to(agent["device"])
    updater = SoftUpdate(value_loss, tau=0.02) if cfg.version == "v3" else None
    return {"model": model_loss, "actor": actor_loss, "value": value_loss, "updater": updater}


# ---------------------------------------------------------------------------- acting


@torch.no_grad()
def run_episode(
    task: Task, agent: dict[str, Any], mode: str, traj_id: int
) -> tuple[TensorDictBase, float]:
    """One episode: ``mode`` is 'random', 'sample' (exploration) or 'mode' (evaluation).

    The actor acts on the RSSM's filtered latents: after each step the belief moves with the
    action taken and the posterior reads the new observation, as in training.
    """
    env, device = task.env, agent["device"]
    s_dim, b_dim = agent["latent_dims"]
    state, belief = torch.zeros(1, s_dim, device=device), torch.zeros(1, b_dim, device=device)
    td = env.reset()
    steps = []
    interaction = InteractionType.DETERMINISTIC if mode == "mode" else InteractionType.RANDOM
    while True:
        if mode == "random":
            action = task.action_spec.rand()
        else:
            with set_interaction_type(interaction):
                out = agent["actor"](TensorDict(state=state, belief=belief, batch_size=[1]))
            action = out["action"][0].cpu()
        td = env.step(td.set("action", action.to(task.env_action_dtype)))
        nxt = td.get("next")
        obs = task.observe(nxt)
        x = task.to_float(obs.to(device)).unsqueeze(0)
        embed = agent["encoder"].module(x)
        belief = agent["prior"](state, belief, action.to(device).unsqueeze(0))[-1]
        state = agent["posterior"](belief, embed)[-1]
        steps.append(
            TensorDict(
                {
                    "action": action,
                    "traj_id": torch.tensor(traj_id),
                    "is_init": torch.tensor([len(steps) == 0]),
                    ("next", task.key): obs,
                    ("next", "reward"): nxt.get("reward").reshape(1).to(torch.float32),
                    ("next", "done"): nxt.get("done").reshape(1),
                    ("next", "terminated"): nxt.get("terminated").reshape(1),
                    ("next", "truncated"): nxt.get("truncated").reshape(1),
                },
                [],
            )
        )
        if bool(nxt.get("done").any()):
            break
        td = td.get("next").exclude("reward")
    episode = torch.stack(steps)
    return episode, float(episode["next", "reward"].sum())


# ---------------------------------------------------------------------------- training


def clip_step(optim: torch.optim.Optimizer, params: list[torch.Tensor], clip: float) -> float:
    norm = torch.nn.utils.clip_grad_norm_(params, clip)
    optim.step()
    return float(norm)


def sample_batch(
    cfg: Config, task: Task, agent: dict[str, Any], buffer: TensorDictReplayBuffer
) -> TensorDictBase:
    """``[batch_size, batch_length]`` sequences on the training device, float observations and
    zero initial latents."""
    s_dim, b_dim = agent["latent_dims"]
    device = agent["device"]
    batch = buffer.sample().reshape(cfg.batch_size, cfg.batch_length).to(device)
    key = ("next", task.key)
    batch.set(key, task.to_float(batch.get(key)))
    shape = (cfg.batch_size, cfg.batch_length)
    batch.set("state", torch.zeros(*shape, s_dim, device=device))
    batch.set("belief", torch.zeros(*shape, b_dim, device=device))
    return batch


def train_step(
    cfg: Config,
    task: Task,
    agent: dict[str, Any],
    losses: dict[str, Any],
    optims: dict[str, torch.optim.Optimizer],
    params: dict[str, list[torch.Tensor]],
    buffer: TensorDictReplayBuffer,
) -> dict[str, float]:
    batch = sample_batch(cfg, task, agent, buffer)
    model_losses, model_out = losses["model"](batch)
    model_total = sum(v for k, v in model_losses.items() if k.startswith("loss"))
    optims["model"].zero_grad()
    model_total.backward()
    clip_step(optims["model"], params["model"], cfg.grad_clip)

    actor_losses, fake = losses["actor"](model_out.get("next"))
    optims["actor"].zero_grad()
    actor_losses["loss_actor"].backward()
    clip_step(optims["actor"], params["actor"], cfg.grad_clip)

    value_losses, _ = losses["value"](fake)
    optims["value"].zero_grad()
    value_losses["loss_value"].backward()
    clip_step(optims["value"], params["value"], cfg.grad_clip)
    if losses["updater"] is not None:
        losses["updater"].step()
    return {
        "loss_model": model_total.item(),
        "loss_model_reward": model_losses["loss_model_reward"].item(),
        "loss_actor": actor_losses["loss_actor"].item(),
        "loss_value": value_losses["loss_value"].item(),
        "imagined_return": fake["next", "reward"].sum(-2).mean().item(),
    }


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    out = run_folder(cfg, "dreamer")
    torch.set_num_threads(cfg.torch_threads)
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    task = Task(cfg)
    task.env.set_seed(cfg.seed)
    agent = build_agent(cfg, task, device)
    losses = build_losses(cfg, agent, task)
    params = {
        "model": list(agent["world_model"].parameters()),
        "actor": list(agent["actor"].parameters()),
        "value": list(agent["value"].parameters()),
    }
    optims = {
        "model": torch.optim.Adam(params["model"], lr=cfg.world_model_lr),
        "actor": torch.optim.Adam(params["actor"], lr=cfg.actor_lr),
        "value": torch.optim.Adam(params["value"], lr=cfg.value_lr),
    }
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(cfg.buffer_size),
        sampler=SliceSampler(slice_len=cfg.batch_length, traj_key="traj_id"),
        batch_size=cfg.batch_size * cfg.batch_length,
    )
    nets = nn.ModuleDict(
        {k: agent[k] for k in ("world_model", "actor", "value")}
        | {f"loss_{k}": losses[k] for k in ("model", "actor", "value")}
    )

    state = load_checkpoint(cfg.resume, cfg) if cfg.resume else None
    episodes = 0
    if state is not None:
        nets.load_state_dict(state["nets"])
        for name, optim in optims.items():
            optim.load_state_dict(state["optims"][name])
        load_buffer_state_dict(buffer, state["buffer"])
        task.env.set_state(state["env"])
        episodes = state["episodes"]
    frames, wall, eval_return, next_eval, next_ckpt = run_counters(cfg, state)
    logger = RunLogger(out, cfg.total_frames, frames, cfg.target_return)
    clock = Stopwatch(wall)

    def snapshot() -> dict[str, object]:
        return {
            "nets": nets.state_dict(),
            "optims": {k: o.state_dict() for k, o in optims.items()},
            "buffer": buffer_state_dict(buffer),
            "env": task.env.get_state(),
            "episodes": episodes,
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
        while frames < cfg.total_frames:
            mode = "random" if frames < cfg.init_random_frames else "sample"
            episode, ep_return = run_episode(task, agent, mode, episodes)
            episodes += 1
            ep_frames = episode.numel() * task.repeat
            frames += ep_frames
            buffer.extend(episode)
            logger.log(frames, **{"train/return": ep_return})
            if frames >= cfg.init_random_frames:
                for _ in range(cfg.updates_per_batch):
                    metrics = train_step(cfg, task, agent, losses, optims, params, buffer)
                logger.log(frames, **metrics)
            if frames >= next_eval:
                next_eval += cfg.eval_every
                returns = [
                    run_episode(task, agent, "mode", -1)[1] for _ in range(cfg.eval_episodes)
                ]
                eval_return = sum(returns) / len(returns)
                logger.log(frames, **{"eval/return": eval_return})
                keeper.evaluated(frames, eval_return, snapshot)
            stop = frames >= cfg.total_frames or eval_return >= cfg.target_return
            if frames >= next_ckpt or stop:
                while next_ckpt <= frames:
                    next_ckpt += cfg.checkpoint_every
                keeper.save(snapshot())
            logger.advance(ep_frames)
            if stop:
                break
    except KeyboardInterrupt:  # Ctrl-C: the final checkpoint below, then exit 130
        keeper.interrupted = True
    ends = keeper.finish(frames, eval_return, snapshot)
    logger.close()
    name = f"dreamer-{cfg.version}"
    plot_learning_curve(logger.csv_path, out / "learning_curve.png", f"{name} {cfg.env}")
    summary: dict[str, object] = {
        "algo": name,
        "env": cfg.env + (" (pixels)" if cfg.pixels else ""),
        "frames": frames,
        "wall_clock_s": round(clock.elapsed(), 1),
        "final_eval_return": eval_return,
        **ends,
    }
    print(write_summary(out, **summary))
    keeper.announce()
    return summary


if __name__ == "__main__":
    main()
