"""Decision Transformer (Chen et al., 2021, arXiv:2106.01345), offline, on Pendulum.

The policy is a GPT-style transformer over windows of (return-to-go, state, action) tokens,
trained to predict the dataset's actions (``DTLoss``, MSE), then asked at evaluation for
several target returns: a return-conditioned policy should reach roughly what it is asked
for, up to the best returns in its data.

Data: a D4RL-format HDF5 file (``--dataset``, e.g. one made by ``recipes/make_dataset.py
--env Pendulum-v1``), or, by default, one this recipe writes first: Pendulum episodes of a
scripted energy-pumping / PD swing-up controller, each episode with its own amount of
Gaussian and uniformly random action noise, so returns spread from about -120 to -1400.
Evaluation runs the batched pure-torch ``PendulumEnv`` (Gymnasium's Pendulum-v1 dynamics),
acting through ``DecisionTransformerInferenceWrapper`` on the last ``context`` steps.
Defaults are the paper's Gym settings (AdamW with a linear warm-up, dropout 0.1, one head)
scaled down for a 3-dimensional state on one CPU core: context 10 (paper 20), 64 wide (128),
2 layers (3), batch 32 (64), 6k updates (100k), so a learning rate of 1e-3 (1e-4): at 1e-4
and 4k updates the policy had not left the data's worst returns.

    uv run recipes/dt.py                         # 6k updates, about 10 minutes on one CPU core
    uv run recipes/dt.py --dataset runs/data-pendulum/d4rl/pendulum-medium-replay-v0.hdf5
    uv run recipes/dt.py --smoke                 # seconds, end to end
    uv run recipes/dt.py --resume runs/dt/checkpoint.pt
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from _config import RunConfig, parse_config

MAX_TORQUE = 2.0
EPISODE_STEPS = 200


@dataclass
class Config(RunConfig):
    """Offline Decision Transformer on Pendulum, evaluated at several target returns."""

    dataset: str = ""
    """D4RL-format HDF5 file of Pendulum transitions; empty: write a scripted-controller one."""
    dataset_episodes: int = 300
    """Episodes of the scripted dataset (when --dataset is empty)."""
    updates: int = 6_000
    """Gradient updates in total (the run's counter: eval and checkpoint steps count updates)."""
    batch_size: int = 32
    """Windows per update."""
    context: int = 10
    """Steps per window (K), in training and at evaluation."""
    n_embd: int = 64
    """Transformer width."""
    n_layer: int = 2
    """Transformer blocks."""
    n_head: int = 1
    """Attention heads."""
    dropout: float = 0.1
    """Dropout on embeddings, residual branches and attention."""
    lr: float = 1e-3
    """AdamW learning rate."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    warmup_updates: int = 300
    """Updates of linear learning-rate warm-up."""
    return_scale: float = 500.0
    """Returns-to-go are divided by this before entering the network."""
    eval_targets: str = "-100,-400,-800"
    """Comma-separated target returns asked for at evaluation."""
    eval_every: int = 1_000
    eval_episodes: int = 10
    checkpoint_every: int = 1_000

    SMOKE: ClassVar[dict[str, object]] = {
        "dataset_episodes": 16,
        "updates": 40,
        "batch_size": 8,
        "context": 5,
        "n_embd": 16,
        "n_layer": 1,
        "warmup_updates": 5,
        "eval_every": 40,
        "eval_episodes": 2,
        "checkpoint_every": 20,
    }


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import numpy as np
import torch
from _common import (
    RunKeeper,
    RunLogger,
    Stopwatch,
    counters_state,
    load_checkpoint,
    plot_learning_curve,
    run_counters,
    run_folder,
    seed_everything,
    write_summary,
)
from _offline import check_offline_arrays
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

from rl_buffers.datasets import read_d4rl_hdf5, write_d4rl_hdf5
from rl_envs import PendulumEnv
from rl_modules import DecisionTransformer, DecisionTransformerInferenceWrapper, DTActor, TanhModule
from rl_objectives import DTLoss

# -- data ---------------------------------------------------------------------------------


def scripted_action(obs: torch.Tensor, noise: torch.Tensor, random_p: torch.Tensor,
                    gen: torch.Generator) -> torch.Tensor:  # fmt: skip
    """Energy pumping towards the upright energy, PD control near the top; then noise."""
    cos, sin, thdot = obs.unbind(-1)
    theta = torch.atan2(sin, cos)
    # undamped Pendulum-v1: 0.5 thdot^2 + 15 cos(theta) is conserved; 15 is upright at rest
    energy = 0.5 * thdot**2 + 15.0 * cos
    pump = MAX_TORQUE * torch.sign(thdot + 1e-3) * torch.sign(15.0 - energy)
    u = torch.where(cos > 0.85, -(10.0 * theta + 2.0 * thdot), pump).clamp(-MAX_TORQUE, MAX_TORQUE)
    u = u + noise * torch.randn(u.shape, generator=gen)
    uniform = (torch.rand(u.shape, generator=gen) * 2 - 1) * MAX_TORQUE
    u = torch.where(torch.rand(u.shape, generator=gen) < random_p, uniform, u)
    return u.clamp(-MAX_TORQUE, MAX_TORQUE).unsqueeze(-1)


def write_scripted_dataset(path: Path, episodes: int, seed: int) -> Path:
    """Roll the noisy scripted controller out and write the episodes as D4RL HDF5."""
    env = PendulumEnv(batch_size=[episodes])
    env.set_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    # per-episode noise level, 0 (expert) .. 1 (mostly random), skewed towards good episodes
    level = torch.rand(episodes, generator=gen) ** 2
    td = env.reset()
    obs, act, rew = [], [], []
    for _ in range(EPISODE_STEPS):
        td["action"] = scripted_action(td["observation"], level, level, gen)
        obs.append(td["observation"])
        act.append(td["action"])
        td = env.step(td)
        rew.append(td["next", "reward"].squeeze(-1))
        td = td["next"].exclude("reward")
    # [episodes, steps] -> D4RL's flat layout, episode after episode
    obs_t, act_t, rew_t = (torch.stack(x, 1).flatten(0, 1).numpy() for x in (obs, act, rew))
    timeouts = np.zeros((episodes, EPISODE_STEPS), dtype=bool)
    timeouts[:, -1] = True
    return write_d4rl_hdf5(path, {"observations": obs_t, "actions": act_t, "rewards": rew_t,
                                  "terminals": np.zeros_like(timeouts).ravel(),
                                  "timeouts": timeouts.ravel()})  # fmt: skip


def load_episodes(path: Path) -> list[dict[str, torch.Tensor]]:
    """Split a D4RL file into episodes (at terminals / timeouts) with returns-to-go."""
    arrays = read_d4rl_hdf5(path)
    check_offline_arrays(arrays, f"dataset {path}")
    obs = torch.as_tensor(arrays["observations"], dtype=torch.float32)
    if obs.shape[-1] != 3 or arrays["actions"].shape[-1] != 1:
        raise ValueError(
            f"{path}: observations of size {obs.shape[-1]} and actions of size "
            f"{arrays['actions'].shape[-1]}; Pendulum needs 3 and 1 (make the file with "
            "recipes/make_dataset.py --env Pendulum-v1, or leave --dataset empty)."
        )
    act = torch.as_tensor(arrays["actions"], dtype=torch.float32)
    rew = torch.as_tensor(arrays["rewards"], dtype=torch.float32).reshape(-1)
    ends = np.flatnonzero(np.asarray(arrays["terminals"]) | np.asarray(arrays["timeouts"]))
    episodes, start = [], 0
    for end in [*ends.tolist(), len(rew) - 1]:
        if end < start:
            continue
        r = rew[start : end + 1]
        rtg = r.flip(0).cumsum(0).flip(0)
        episodes.append({"observation": obs[start : end + 1], "action": act[start : end + 1],
                         "rtg": rtg, "return": r.sum()})  # fmt: skip
        start = end + 1
    return episodes


class WindowSampler:
    """Random windows of ``context`` steps ending anywhere in an episode, zero-padded in front
    (as the evaluation's window is at the start of an episode), with a validity mask."""

    def __init__(self, episodes: list[dict[str, torch.Tensor]], context: int,
                 obs_mean: torch.Tensor, obs_std: torch.Tensor, return_scale: float) -> None:  # fmt: skip
        self.context = context
        lengths = torch.tensor([len(e["rtg"]) for e in episodes])
        pad = context - 1
        total = int(lengths.sum())
        # episodes laid end to end, each preceded by `pad` zero steps
        self.obs = torch.zeros(total + pad * len(episodes), 3)
        self.act = torch.zeros(total + pad * len(episodes), 1)
        self.rtg = torch.zeros(total + pad * len(episodes), 1)
        self.step = torch.zeros(total + pad * len(episodes), dtype=torch.long)
        self.valid = torch.zeros(total + pad * len(episodes), dtype=torch.bool)
        ends, pos = [], 0
        for e in episodes:
            pos += pad
            n = len(e["rtg"])
            self.obs[pos : pos + n] = (e["observation"] - obs_mean) / obs_std
            self.act[pos : pos + n] = e["action"] / MAX_TORQUE
            self.rtg[pos : pos + n, 0] = e["rtg"] / return_scale
            self.step[pos : pos + n] = torch.arange(n)
            self.valid[pos : pos + n] = True
            ends.append(torch.arange(pos, pos + n))
            pos += n
        self.ends = torch.cat(ends)  # every real step can end a window

    def sample(self, batch_size: int, gen: torch.Generator) -> TensorDict:
        end = self.ends[torch.randint(len(self.ends), (batch_size,), generator=gen)]
        idx = end[:, None] + torch.arange(-self.context + 1, 1)
        return TensorDict(observation=self.obs[idx], action=self.act[idx], return_to_go=self.rtg[idx],
                          timestep=self.step[idx], mask=self.valid[idx], batch_size=[batch_size])  # fmt: skip


# -- policy and evaluation ----------------------------------------------------------------


def make_actor(cfg: Config) -> TensorDictSequential:
    config = DecisionTransformer.DTConfig(
        n_embd=cfg.n_embd, n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=4 * cfg.n_embd,
        n_positions=3 * cfg.context, resid_pdrop=cfg.dropout, attn_pdrop=cfg.dropout,
        max_timestep=EPISODE_STEPS,
    )  # fmt: skip
    net = DTActor(state_dim=3, action_dim=1, transformer_config=config)
    keys = ["observation", "action", "return_to_go", "timestep"]
    return TensorDictSequential(
        TensorDictModule(net, keys, ["param"]), TanhModule(["param"], ["action"])
    )


@torch.no_grad()
def evaluate_targets(actor: TensorDictSequential, cfg: Config, targets: list[float],
                     obs_mean: torch.Tensor, obs_std: torch.Tensor, seed: int) -> list[float]:  # fmt: skip
    """Mean return of ``eval_episodes`` episodes per target, all targets in one batched env."""
    n, k = cfg.eval_episodes * len(targets), cfg.context
    env = PendulumEnv(batch_size=[n])
    env.set_seed(seed)
    policy = DecisionTransformerInferenceWrapper(actor, inference_context=k)
    actor.eval()
    td = env.reset()
    win = TensorDict(observation=torch.zeros(n, k, 3), action=torch.zeros(n, k, 1),
                     return_to_go=torch.zeros(n, k, 1), timestep=torch.zeros(n, k, dtype=torch.long),
                     batch_size=[n])  # fmt: skip
    rtg = torch.tensor(targets).repeat_interleave(cfg.eval_episodes)
    returns = torch.zeros(n)
    for t in range(EPISODE_STEPS):
        # the newest step enters at the right; the action window ends with a_{t-1}
        new = {"observation": (td["observation"] - obs_mean) / obs_std,
               "return_to_go": (rtg / cfg.return_scale).unsqueeze(-1),
               "timestep": torch.full((n,), t)}  # fmt: skip
        for key, value in new.items():
            win[key] = torch.cat([win[key][:, 1:], value.unsqueeze(1)], 1)
        action = policy(win)["action"]
        td["action"] = action * MAX_TORQUE
        td = env.step(td)
        reward = td["next", "reward"].squeeze(-1)
        returns += reward
        rtg = rtg - reward
        win["action"] = torch.cat([win["action"][:, 1:], action.unsqueeze(1)], 1)
        td = td["next"].exclude("reward")
    actor.train()
    return returns.view(len(targets), cfg.eval_episodes).mean(1).tolist()


# -- training ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, object]:
    cfg = parse_config(Config, argv)
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    out = run_folder(cfg, "dt")
    scripted = out / f"pendulum-scripted-{cfg.dataset_episodes}ep-seed{cfg.seed}-v0.hdf5"
    path = Path(cfg.dataset) if cfg.dataset else scripted
    if not cfg.dataset and not path.exists():
        write_scripted_dataset(path, cfg.dataset_episodes, cfg.seed)
    episodes = load_episodes(path)
    all_obs = torch.cat([e["observation"] for e in episodes])
    obs_mean, obs_std = all_obs.mean(0), all_obs.std(0).clamp_min(1e-6)
    data_returns = torch.stack([e["return"] for e in episodes])
    sampler = WindowSampler(episodes, cfg.context, obs_mean, obs_std, cfg.return_scale)
    targets = [float(x) for x in cfg.eval_targets.split(",")]

    actor = make_actor(cfg)
    loss_module = DTLoss(actor, loss_function="l2", reduction="none")
    optim = torch.optim.AdamW(actor.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        optim, lambda u: min(1.0, (u + 1) / max(1, cfg.warmup_updates))
    )
    gen = torch.Generator().manual_seed(cfg.seed)
    state = load_checkpoint(cfg.resume, cfg) if cfg.resume else None
    if state is not None:
        actor.load_state_dict(state["actor"])
        optim.load_state_dict(state["optim"])
        sched.load_state_dict(state["sched"])
        gen.set_state(state["sampler_rng"])
    updates, wall, eval_return, next_eval, next_ckpt = run_counters(cfg, state)
    clock = Stopwatch(wall)
    logger = RunLogger(out, cfg.updates, updates, unit="updates")
    if state is None:
        logger.log(
            0, **{"data/best_return": data_returns.max(), "data/mean_return": data_returns.mean()}
        )
    results: dict[str, float] = {}

    def snapshot() -> dict[str, object]:
        return {
            **counters_state(cfg, frames=updates, wall=clock.elapsed(), eval_return=eval_return,
                             next_eval=next_eval, next_ckpt=next_ckpt),
            "actor": actor.state_dict(), "optim": optim.state_dict(), "sched": sched.state_dict(),
            "sampler_rng": gen.get_state(), "loss": loss_module.state_dict(),
        }  # fmt: skip

    keeper = RunKeeper(out, cfg, cfg.updates, state, unit="updates")
    try:
        while updates < cfg.updates:
            batch = sampler.sample(cfg.batch_size, gen)
            per_elem = loss_module(batch)["loss"]  # [B, K, 1]; padded steps are masked out
            mask = batch["mask"].unsqueeze(-1)
            loss = (per_elem * mask).sum() / mask.sum()
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(actor.parameters(), 0.25)
            optim.step()
            sched.step()
            updates += 1
            if updates % 50 == 0 or updates == cfg.updates:
                logger.log(updates, **{"train/loss": loss.item()})
            if updates >= next_eval or updates == cfg.updates:
                got = evaluate_targets(actor, cfg, targets, obs_mean, obs_std, seed=cfg.seed + 1)
                results = {
                    f"eval/target{int(t)}_return": r for t, r in zip(targets, got, strict=True)
                }
                logger.log(updates, **results)
                eval_return = max(got)
                keeper.evaluated(updates, eval_return, snapshot)
                next_eval += cfg.eval_every
            if updates >= next_ckpt or updates == cfg.updates:
                next_ckpt += cfg.checkpoint_every
                keeper.save(snapshot())
            logger.advance(1)
    except KeyboardInterrupt:  # Ctrl-C: the final checkpoint below, then exit 130
        keeper.interrupted = True
    ends = keeper.finish(updates, eval_return, snapshot)
    logger.close()
    plot_learning_curve(logger.csv_path, out / "learning_curve.png", "DT Pendulum (offline)")
    summary: dict[str, object] = {
        "algo": "dt", "env": "Pendulum", "frames": updates, "updates": updates,
        "wall_clock_s": round(clock.elapsed(), 1), "final_eval_return": eval_return,
        "dataset": str(path), "dataset_best_return": round(float(data_returns.max()), 1),
        "dataset_mean_return": round(float(data_returns.mean()), 1),
        **{k.removeprefix("eval/"): round(v, 1) for k, v in results.items()}, **ends,
    }  # fmt: skip
    print(write_summary(out, **summary))
    keeper.announce()
    return summary


if __name__ == "__main__":
    main()
