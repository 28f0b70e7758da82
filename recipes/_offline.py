"""The loop every offline recipe shares (IQL, CQL, TD3+BC, BC); the recipes keep what differs.

A recipe reads a dataset written by ``recipes/make_dataset.py`` (a D4RL HDF5 file, or a
local Minari dataset), builds its networks, loss, optimizers and one ``update(sample)``
function, then hands them to :func:`train_offline` in an :class:`OfflineRun`. The loop
samples ``batch_size`` transitions per gradient step, evaluates the policy in the env every
``eval_every`` steps (return, and the D4RL-normalised score when the dataset's reference
returns are known), checkpoints every ``checkpoint_every`` steps (and when it stops: budget,
target or Ctrl-C; ``best.pt`` keeps the best evaluation's) and resumes from
``cfg.resume`` exactly where it stopped. Offline, the progress counter is gradient steps:
``eval_every`` and ``checkpoint_every`` count steps, not frames.

Example (the skeleton of a recipe's ``main``)::

    cfg = parse_config(Config, argv)
    env, buffer, references = setup_offline(cfg, "iql")
    ...  # networks, loss, optimizers, update()
    run = OfflineRun(algo="iql", update=update, eval_policy=actor, stateful={...})
    return train_offline(cfg, run, env, buffer, references)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from _common import (
    RunKeeper,
    RunLogger,
    ScalarMeans,
    Stopwatch,
    counters_state,
    evaluate,
    load_checkpoint,
    make_base_env,
    plot_learning_curve,
    run_counters,
    run_folder,
    seed_everything,
    write_summary,
)
from _config import SMOKE_OFFLINE as SMOKE_OFFLINE
from _config import OfflineConfig as OfflineConfig
from _config import smoke_overrides as smoke_overrides
from tensordict import TensorDictBase

from rl_buffers.datasets import (
    D4RLExperienceReplay,
    DatasetReplayBuffer,
    MinariExperienceReplay,
    check_matches_env,
    read_d4rl_hdf5,
)
from rl_envs import Compose, DoubleToFloat, RewardSum, StepCounter, TransformedEnv

RESERVED = {"config", "frames", "wall", "eval_return", "next_eval", "next_ckpt", "rng", "best"}
"""Checkpoint entries the loop writes itself."""


@dataclass
class OfflineRun:
    """What differs between offline recipes, handed to :func:`train_offline`."""

    algo: str
    """Name in the summary and the plot's title (``"iql"``)."""
    update: Callable[[TensorDictBase], Mapping[str, torch.Tensor | float]]
    """One gradient step on a sampled minibatch; returns scalars to log."""
    eval_policy: Any
    """Policy evaluated in the env (its mode: no sampling)."""
    stateful: dict[str, Any]
    """Checkpointed objects by name (``state_dict`` / ``load_state_dict``): loss, optimizers, ..."""


def make_env(env: str) -> TransformedEnv:
    """The evaluation env, as the online recipes build it (float32 observations, returns)."""
    return TransformedEnv(make_base_env(env), Compose(DoubleToFloat(), StepCounter(), RewardSum()))


def smoke_dataset(cfg: OfflineConfig) -> Path:
    """A tiny random-policy D4RL file under ``<output_dir>/data``, for ``--smoke``."""
    import make_dataset

    from rl_buffers.datasets import write_d4rl_hdf5

    root = Path(cfg.output_dir) / "data"
    env = TransformedEnv(make_base_env(cfg.env, num_envs=2), DoubleToFloat())
    env.set_seed(cfg.seed)
    return write_d4rl_hdf5(
        make_dataset.d4rl_path(root, cfg.env, "random"), make_dataset.collect(env, None, 400)
    )


def check_offline_arrays(arrays: Mapping[str, Any], source: str) -> None:
    """Refuse D4RL arrays that would train on garbage, naming the field and the fix.

    Checks, before any training: every field has one entry per transition; observations,
    actions, rewards and next observations are finite; ``rewards`` holds one number per
    transition (``[N]`` or ``[N, 1]``); ``terminals`` and ``timeouts`` hold only 0 and 1
    (a 0.5 would silently become ``True``).

    Raises:
        ValueError: naming ``source``, the field, what was expected and what came.

    Example:
        >>> import numpy as np
        >>> check_offline_arrays({"observations": np.zeros((2, 3)), "actions": np.zeros((2, 1)),
        ...     "rewards": np.zeros(2), "terminals": np.array([0, 1])}, "toy")
    """
    import numpy as np

    n = len(arrays["observations"]) if "observations" in arrays else None
    for name, value in arrays.items():
        value = np.asarray(value)
        if value.ndim == 0 or (n is not None and len(value) != n):
            raise ValueError(
                f"{source}: field {name!r} has shape {value.shape}, expected {n} entries (one "
                "per transition, as 'observations'). Rewrite the dataset with make_dataset.py."
            )
        if name in ("terminals", "timeouts"):
            if value.dtype != np.bool_:
                ok = np.isin(value, (0, 1))
                if not ok.all():
                    i = int(np.flatnonzero(~ok.reshape(len(value), -1).all(axis=1))[0])
                    raise ValueError(
                        f"{source}: field {name!r} must hold only 0/1 flags, got "
                        f"{value.reshape(len(value), -1)[i].tolist()} at transition {i} "
                        f"({int((~ok).sum())} bad entries). Rewrite the flags as booleans."
                    )
            continue
        if not np.issubdtype(value.dtype, np.number):
            raise ValueError(f"{source}: field {name!r} has dtype {value.dtype}, expected numbers.")
        if np.issubdtype(value.dtype, np.floating):
            finite = np.isfinite(value).reshape(len(value), -1).all(axis=1)
            if not finite.all():
                i = int(np.flatnonzero(~finite)[0])
                raise ValueError(
                    f"{source}: field {name!r} holds NaN or inf in {int((~finite).sum())} "
                    f"transition(s), the first at index {i}. Clean or drop those transitions."
                )
        if name == "rewards" and not (value.ndim == 1 or value.shape[1:] == (1,)):
            raise ValueError(
                f"{source}: field 'rewards' has shape {value.shape}, expected ({n},) or "
                f"({n}, 1): one scalar reward per transition. Sum or select the reward terms "
                "when writing the dataset."
            )


def load_d4rl(path: Path, batch_size: int) -> DatasetReplayBuffer:
    """A D4RL HDF5 file as a replay buffer, its arrays checked first (:func:`check_offline_arrays`)."""
    if path.is_file():  # a missing file: the loader's own message says how to make one
        check_offline_arrays(read_d4rl_hdf5(path), f"dataset {path}")
    return D4RLExperienceReplay(path.stem, batch_size, root=path.parent)


def load_dataset(cfg: OfflineConfig, env: Any) -> DatasetReplayBuffer:
    """The dataset as a replay buffer sampling ``batch_size``, checked against the env's shapes."""
    if cfg.minari_root:
        buffer: DatasetReplayBuffer = MinariExperienceReplay(
            cfg.dataset, cfg.batch_size, root=cfg.minari_root
        )
    else:
        path = Path(cfg.dataset)
        if path.suffix != ".hdf5":
            raise ValueError(
                f"--dataset {cfg.dataset!r}: expected a D4RL '.hdf5' file, or a Minari id with "
                "--minari-root. Make one with `uv run recipes/make_dataset.py`."
            )
        buffer = load_d4rl(path, cfg.batch_size)
    if cfg.minari_root:  # Minari's episodes, as loaded: the same checks on the transitions
        steps = buffer.storage[: len(buffer.storage)]
        check_offline_arrays(
            {
                "observations": steps["observation"].numpy(),
                "actions": steps["action"].numpy(),
                "rewards": steps["next", "reward"].numpy(),
                "next_observations": steps["next", "observation"].numpy(),
            },
            f"Minari dataset {cfg.dataset}",
        )
    check_matches_env(buffer.storage[:1], env)
    return buffer


def load_references(cfg: OfflineConfig) -> dict[str, Any] | None:
    """The random / expert returns of the dataset's task, or ``None`` when none are found."""
    import make_dataset

    if cfg.references:
        path = Path(cfg.references)
    elif cfg.minari_root:
        path = make_dataset.references_path(Path(cfg.minari_root).parent, cfg.env)
    else:
        path = Path(cfg.dataset).parent / make_dataset.references_path("", cfg.env).name
    if not path.is_file():
        if cfg.references:
            raise FileNotFoundError(f"--references {cfg.references}: no such file")
        return None
    return json.loads(path.read_text())


def normalized_score(ret: float, references: Mapping[str, Any] | None) -> float:
    """D4RL's score: ``100 * (R - R_random) / (R_expert - R_random)`` (nan without references).

    Example:
        >>> normalized_score(50.0, {"random_return": 0.0, "expert_return": 200.0})
        25.0
    """
    if references is None:
        return float("nan")
    low, high = references["random_return"], references["expert_return"]
    return 100.0 * (ret - low) / (high - low)


def setup_offline(cfg: OfflineConfig, algo: str) -> tuple[TransformedEnv, DatasetReplayBuffer, Any]:
    """The run's folder (:func:`run_folder`); seed, set threads, make the smoke dataset if asked;
    return the env, the data, the references."""
    run_folder(cfg, algo)
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    if cfg.smoke and not cfg.dataset:
        cfg.dataset = str(smoke_dataset(cfg))
    env = make_env(cfg.env)
    return env, load_dataset(cfg, env), load_references(cfg)


def _item(value: torch.Tensor | float) -> float:
    return float(value.detach()) if isinstance(value, torch.Tensor) else float(value)


def train_offline(cfg: OfflineConfig, run: OfflineRun, env: Any, buffer: DatasetReplayBuffer,
                  references: Mapping[str, Any] | None) -> dict[str, object]:  # fmt: skip
    """Sample, update, log, evaluate, checkpoint; return the run's summary."""
    clash = RESERVED & set(run.stateful)
    if clash:
        raise ValueError(f"stateful names {sorted(clash)} clash with the checkpoint's own entries")
    out = run_folder(cfg, run.algo)
    state = load_checkpoint(cfg.resume, cfg) if cfg.resume else None
    if state is not None:
        for name, obj in run.stateful.items():
            obj.load_state_dict(state[name])
    counters = run_counters(cfg, state)
    logger = RunLogger(out, cfg.num_steps, counters.frames, cfg.target_return, "steps")
    clock = Stopwatch(counters.wall)
    means = ScalarMeans()
    score = normalized_score(counters.eval_return, references)

    def snapshot() -> dict[str, Any]:
        return {
            **{name: obj.state_dict() for name, obj in run.stateful.items()},
            **counters_state(
                cfg,
                frames=counters.frames,
                wall=clock.elapsed(),
                eval_return=counters.eval_return,
                next_eval=counters.next_eval,
                next_ckpt=counters.next_ckpt,
            ),
        }

    keeper = RunKeeper(out, cfg, cfg.num_steps, state, unit="gradient steps")
    try:
        while counters.frames < cfg.num_steps:
            sample = buffer.sample()
            if cfg.reward_scale != 1.0:
                sample["next", "reward"] = sample["next", "reward"] * cfg.reward_scale
            means.add({k: torch.as_tensor(_item(v)) for k, v in run.update(sample).items()})
            counters.frames += 1
            if counters.frames % cfg.log_every == 0:
                logger.log(counters.frames, **means.pop())
                logger.advance(cfg.log_every)
            stop = counters.frames >= cfg.num_steps
            if counters.frames >= counters.next_eval or stop:
                counters.next_eval += cfg.eval_every
                counters.eval_return = evaluate(
                    env, run.eval_policy, cfg.eval_episodes, seed=cfg.seed + 10_000
                )
                score = normalized_score(counters.eval_return, references)
                logger.log(counters.frames, **{"eval/return": counters.eval_return})
                if references is not None:
                    logger.log(counters.frames, **{"eval/normalized_score": score})
                keeper.evaluated(counters.frames, counters.eval_return, snapshot)
                stop = stop or counters.eval_return >= cfg.target_return
            if counters.frames >= counters.next_ckpt or stop:
                while counters.next_ckpt <= counters.frames:
                    counters.next_ckpt += cfg.checkpoint_every
                keeper.save(snapshot())
            if stop:
                break
    except KeyboardInterrupt:  # Ctrl-C: the final checkpoint below, then exit 130
        keeper.interrupted = True
    ends = keeper.finish(counters.frames, counters.eval_return, snapshot)
    logger.close()
    plot_learning_curve(
        logger.csv_path, out / "learning_curve.png", f"{run.algo.upper()} {cfg.env}"
    )
    summary: dict[str, object] = {
        "algo": run.algo,
        "env": cfg.env,
        "dataset": cfg.dataset,
        "gradient_steps": counters.frames,
        "wall_clock_s": round(clock.elapsed(), 1),
        "final_eval_return": counters.eval_return,
        "final_normalized_score": score,
        **ends,
    }
    print(write_summary(out, **summary))
    keeper.announce()
    return summary
