"""Offline datasets made by our own SAC, in D4RL's naming and in both D4RL HDF5 and Minari format.

D4RL (Fu et al., 2020, arXiv:2004.07219) names datasets by the policy that collected them:

- ``random``: uniformly random actions;
- ``medium``: a SAC policy stopped part-way (here after ``--medium-frames``);
- ``expert``: the same SAC trained on (here to ``--expert-frames``);
- ``medium-replay``: the SAC replay buffer up to the medium policy (all its training data);
- ``medium-expert``: ``medium`` and ``expert`` concatenated.

The SAC is ``recipes/sac.py`` itself (its flags pass through ``--sac-args``), run to the
medium budget, checkpointed, then resumed to the expert budget. The medium and expert
datasets sample the stochastic policy, as D4RL's. Each dataset is written as
``<out>/d4rl/<task>-<level>-v0.hdf5`` (with ``next_observations``) and as the Minari dataset
``local/<task>/<level>-v0`` under ``<out>/minari``; ``<out>/d4rl/<task>-references.json``
holds the returns that normalise scores (random and expert policy) and per-dataset stats.

    uv run recipes/make_dataset.py                      # HalfCheetah-v5 (see docs/results.md)
    uv run recipes/make_dataset.py --env Pendulum-v1 --medium-frames 4000 \\
        --expert-frames 10000 --dataset-frames 20000 --output-dir runs/data-pendulum
    uv run recipes/make_dataset.py --smoke              # seconds, Pendulum
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import sac
from _config import RunConfig, parse_config

LEVELS = ("random", "medium", "expert", "medium-replay", "medium-expert")


@dataclass
class Config(RunConfig):
    """Train SAC, then write random / medium / expert / replay datasets in D4RL and Minari format."""

    env: str = "HalfCheetah-v5"
    """Gymnasium id of the task (continuous actions)."""
    medium_frames: int = 30_000
    """SAC frames to the medium policy (its replay buffer is the medium-replay dataset)."""
    expert_frames: int = 60_000
    """SAC frames in total, to the expert policy."""
    dataset_frames: int = 50_000
    """Transitions collected for each of the random, medium and expert datasets."""
    collect_envs: int = 10
    """Envs stepped in parallel while collecting a dataset."""
    sac_args: str = ""
    """Extra flags for recipes/sac.py (e.g. "--utd-ratio 0.5")."""
    eval_every: int = 5_000

    SMOKE: ClassVar[dict[str, object]] = {
        "env": "Pendulum-v1",
        "medium_frames": 1_000,
        "expert_frames": 1_500,
        "dataset_frames": 400,
        "collect_envs": 2,
        "eval_episodes": 1,
        "eval_every": 1_000,
    }

    def validate(self) -> None:
        """The budgets must make a medium policy that is an earlier stage of the expert one."""
        if self.expert_frames <= self.medium_frames:
            raise ValueError(
                f"--expert-frames {self.expert_frames} must be greater than --medium-frames "
                f"{self.medium_frames}: the expert policy is the same SAC trained on past the "
                "medium one. Raise --expert-frames or lower --medium-frames."
            )


if __name__ == "__main__":  # --help and bad flags answer before the heavy imports below
    parse_config(Config)

# ruff: noqa: E402 (the heavy imports come after the flags are parsed: --help is instant)
import numpy as np
import torch
from _common import evaluate, make_base_env, read_checkpoint, run_folder, seed_everything
from tensordict import TensorDict

from rl_buffers import LazyTensorStorage, TensorDictReplayBuffer
from rl_buffers.datasets import write_d4rl_hdf5, write_minari_dataset
from rl_collectors import Collector
from rl_envs import DoubleToFloat, TransformedEnv
from rl_objectives import SACLoss


def task_name(env: str) -> str:
    """D4RL's lower-case task name of an env id: ``"HalfCheetah-v5"`` -> ``"halfcheetah"``.

    Example:
        >>> task_name("HalfCheetah-v5"), task_name("rl_envs:PendulumEnv")
        ('halfcheetah', 'pendulum')
    """
    name = env.rpartition(":")[2]
    name = re.sub(r"-v\d+$", "", name)
    name = re.sub(r"Env$", "", name)
    return name.lower()


def d4rl_path(root: str | Path, env: str, level: str) -> Path:
    """Where a dataset's HDF5 file goes: ``<root>/d4rl/<task>-<level>-v0.hdf5``."""
    return Path(root) / "d4rl" / f"{task_name(env)}-{level}-v0.hdf5"


def minari_id(env: str, level: str) -> str:
    """The Minari id of a dataset: ``local/<task>/<level>-v0``."""
    return f"local/{task_name(env)}/{level}-v0"


def references_path(root: str | Path, env: str) -> Path:
    """The JSON file of normalising returns next to the HDF5 files."""
    return Path(root) / "d4rl" / f"{task_name(env)}-references.json"


def arrays_from_steps(steps: TensorDict) -> dict[str, np.ndarray]:
    """D4RL arrays of time-ordered TED steps ``[T]`` of one env; a last unfinished episode is
    marked as timed out (D4RL does the same at a dataset's end)."""
    nxt = steps["next"]
    terminals = nxt["terminated"].reshape(-1).clone()
    timeouts = nxt["truncated"].reshape(-1) & ~terminals
    cut = torch.zeros_like(terminals)
    if not bool(terminals[-1] | timeouts[-1]):
        timeouts[-1] = cut[-1] = True
    return {
        "observations": steps["observation"].float().numpy(),
        "actions": steps["action"].float().numpy(),
        "rewards": nxt["reward"].reshape(-1).float().numpy(),
        "next_observations": nxt["observation"].float().numpy(),
        "terminals": terminals.numpy(),
        "timeouts": timeouts.numpy(),
        "cut": cut.numpy(),  # not a D4RL field: marks the episode the data's end cut short
    }


def concat_arrays(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


def episodes_of(arrays: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Minari episodes (``observations`` has ``T + 1`` entries) of D4RL arrays with next observations."""
    ends = np.flatnonzero(arrays["terminals"] | arrays["timeouts"])
    starts = np.concatenate([[0], ends[:-1] + 1])
    return [
        {
            "observations": np.concatenate(
                [arrays["observations"][s : e + 1], arrays["next_observations"][e : e + 1]]
            ),
            "actions": arrays["actions"][s : e + 1],
            "rewards": arrays["rewards"][s : e + 1],
            "terminations": arrays["terminals"][s : e + 1],
            "truncations": arrays["timeouts"][s : e + 1],
        }
        for s, e in zip(starts, ends, strict=True)
    ]


def episode_returns(arrays: dict[str, np.ndarray]) -> list[float]:
    """Returns of the dataset's episodes, those cut short by the data's end left out."""
    ends = np.flatnonzero(arrays["terminals"] | arrays["timeouts"])
    returns = [float(ep["rewards"].sum()) for ep in episodes_of(arrays)]
    return [r for r, e in zip(returns, ends, strict=True) if not arrays["cut"][e]]


def collect(env: Any, policy: Any, frames: int) -> dict[str, np.ndarray]:
    """``frames`` steps of ``policy`` (``None``: uniform random) in a batched env, as D4RL arrays."""
    n = env.batch_size[0]
    per_env = -(-frames // n)
    collector = Collector(env, policy, frames_per_batch=per_env * n, total_frames=per_env * n)
    batch = next(iter(collector))
    collector.shutdown()
    return concat_arrays([arrays_from_steps(batch[i]) for i in range(n)])


def write_both(root: Path, env_id: str, level: str, arrays: dict[str, np.ndarray],
               spaces: tuple[Any, Any]) -> None:  # fmt: skip
    """Write one dataset as a D4RL HDF5 file and as a local Minari dataset."""
    write_d4rl_hdf5(d4rl_path(root, env_id, level), arrays)
    dataset_id = minari_id(env_id, level)
    target = root / "minari" / dataset_id
    if target.exists():
        shutil.rmtree(target)  # Minari refuses to overwrite
    write_minari_dataset(
        dataset_id,
        episodes_of(arrays),
        observation_space=spaces[0],
        action_space=spaces[1],
        root=root / "minari",
        algorithm_name=f"rl-recipes SAC ({level})",
    )


def gym_spaces(env: Any) -> tuple[Any, Any]:
    """Gymnasium Box spaces of the env's observation and action (for Minari's metadata)."""
    import gymnasium as gym

    batch = len(env.batch_size)
    obs_shape = tuple(env.observation_spec["observation"].shape[batch:])
    act = env.action_spec
    low = act.space.low.reshape(-1, *act.shape[batch:])[0].numpy()
    high = act.space.high.reshape(-1, *act.shape[batch:])[0].numpy()
    return (
        gym.spaces.Box(-np.inf, np.inf, obs_shape, np.float32),
        gym.spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32),
    )


def sac_argv(cfg: Config, frames: int, out: Path) -> list[str]:
    argv = ["--env", cfg.env, "--seed", str(cfg.seed), "--total-frames", str(frames),
            "--output-dir", str(out), "--eval-every", str(cfg.eval_every),
            "--eval-episodes", str(cfg.eval_episodes), "--checkpoint-every", str(frames),
            "--torch-threads", str(cfg.torch_threads)]  # fmt: skip
    return (["--smoke"] if cfg.smoke else []) + argv + shlex.split(cfg.sac_args)


def train_sac(cfg: Config, out: Path) -> tuple[Path, Path]:
    """Run sac.py to the medium budget, keep that checkpoint, resume to the expert budget.

    A phase whose checkpoint exists is skipped, and an interrupted expert phase resumes
    from its last checkpoint: re-running this recipe continues where it stopped.
    """
    medium, expert = out / "medium.pt", out / "expert.pt"
    if not medium.is_file():
        sac.main([*sac_argv(cfg, cfg.medium_frames, out), "--overwrite"])  # restart a partial one
        shutil.copyfile(out / "checkpoint.pt", medium)
    if not expert.is_file():
        last = out / "checkpoint.pt"
        start = last if read_checkpoint(last)["frames"] > cfg.medium_frames else medium
        sac.main([*sac_argv(cfg, cfg.expert_frames, out), "--resume", str(start)])
        shutil.copyfile(out / "checkpoint.pt", expert)
    return medium, expert


def load_sac(cfg: Config, checkpoint: Path) -> tuple[Any, dict[str, Any]]:
    """The SAC actor of a sac.py checkpoint, and the checkpoint."""
    scfg = sac.parse_config(sac.Config, sac_argv(cfg, cfg.expert_frames, Path(cfg.output_dir)))
    env = sac.make_env(scfg)
    actor, qvalue = sac.make_agent(scfg, env)
    loss = SACLoss(actor, qvalue, num_qvalue_nets=2, loss_function="l2",
                   alpha_init=scfg.alpha_init, action_spec=env.action_spec, delay_qvalue=True)  # fmt: skip
    state = read_checkpoint(checkpoint)
    loss.load_state_dict(state["loss"])  # the actor module shares the loss's parameters
    return actor, state


def replay_arrays(state: dict[str, Any]) -> dict[str, np.ndarray]:
    """The SAC replay buffer of a checkpoint (one env, time-ordered), as D4RL arrays."""
    saved = state["buffer"]["storage"]
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(saved["max_size"]))
    buffer.storage.load_state_dict(saved)
    steps = buffer.storage[: len(buffer.storage)]
    if len(steps) == saved["max_size"]:  # a full ring buffer: the oldest step is at the cursor
        steps = torch.cat([steps[saved["cursor"] :], steps[: saved["cursor"]]])
    return arrays_from_steps(steps)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    cfg = parse_config(Config, argv)
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    out = run_folder(cfg, "make_dataset")
    medium_ckpt, expert_ckpt = train_sac(cfg, out / "sac")
    env = TransformedEnv(make_base_env(cfg.env, num_envs=cfg.collect_envs), DoubleToFloat())
    env.set_seed(cfg.seed)
    spaces = gym_spaces(env)
    eval_env = sac.make_env(sac.Config(env=cfg.env))
    medium_actor, medium_state = load_sac(cfg, medium_ckpt)
    expert_actor, _ = load_sac(cfg, expert_ckpt)
    datasets = {
        "random": collect(env, None, cfg.dataset_frames),
        "medium": collect(env, medium_actor, cfg.dataset_frames),
        "expert": collect(env, expert_actor, cfg.dataset_frames),
        "medium-replay": replay_arrays(medium_state),
    }
    datasets["medium-expert"] = concat_arrays([datasets["medium"], datasets["expert"]])
    stats = {}
    for level in LEVELS:
        write_both(out, cfg.env, level, datasets[level], spaces)
        returns = episode_returns(datasets[level])
        stats[level] = {
            "transitions": len(datasets[level]["rewards"]),
            "episodes": len(returns),
            "mean_return": float(np.mean(returns)) if returns else float("nan"),
        }
    # the offline recipes evaluate on these very episodes (seed + 10_000): a perfect clone of
    # the expert scores 100 exactly
    seed = cfg.seed + 10_000
    references = {
        "env": cfg.env,
        "random_return": evaluate(eval_env, None, cfg.eval_episodes, seed=seed),
        "medium_return": evaluate(eval_env, medium_actor, cfg.eval_episodes, seed=seed),
        "expert_return": evaluate(eval_env, expert_actor, cfg.eval_episodes, seed=seed),
        "sac_frames": {"medium": cfg.medium_frames, "expert": cfg.expert_frames},
        "datasets": stats,
    }
    references_path(out, cfg.env).write_text(json.dumps(references, indent=1) + "\n")
    print(json.dumps(references))
    return references


if __name__ == "__main__":
    main()
