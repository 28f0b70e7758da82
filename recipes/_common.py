"""Plumbing shared by every recipe: run folders, logging, checkpoints, plots, summaries.

A recipe is one readable file: a config dataclass (each field carries a one-line
docstring), then one linear training loop. Everything that is not the algorithm
lives here, once. The flags themselves (:class:`RunConfig`, :func:`parse_config`, the range
checks) live in the light ``_config`` module (standard library only, so that ``--help``
answers before torch is imported) and are re-exported here.
"""

from __future__ import annotations

import csv
import dataclasses
import errno
import hashlib
import json
import math
import os
import random
import shutil
import struct
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _config import COMMON_FIELDS_DOC as COMMON_FIELDS_DOC
from _config import FIELD_CHECKS as FIELD_CHECKS
from _config import RunConfig as RunConfig
from _config import any_float as any_float
from _config import check_fields as check_fields
from _config import describe_presets as describe_presets
from _config import field_checks as field_checks
from _config import field_docs as field_docs
from _config import finite_float as finite_float
from _config import fraction as fraction
from _config import nonnegative_float as nonnegative_float
from _config import nonnegative_int as nonnegative_int
from _config import not_nan as not_nan
from _config import open_unit_interval as open_unit_interval
from _config import parse_config as parse_config
from _config import positive_float as positive_float
from _config import positive_int as positive_int
from _config import positive_or_inf as positive_or_inf
from _config import unit_interval as unit_interval
from torch import nn


def orthogonal_init(mlp: nn.Module, last_gain: float) -> None:
    """Orthogonal weights, zero biases; a small last layer keeps the first policy near-uniform."""
    linears = [m for m in mlp.modules() if isinstance(m, nn.Linear)]
    for layer in linears:
        nn.init.orthogonal_(layer.weight, gain=last_gain if layer is linears[-1] else 2**0.5)
        nn.init.zeros_(layer.bias)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch; recipes also seed their envs."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """Every global RNG state, for bit-identical resumes."""
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state["cuda"]:
        torch.cuda.set_rng_state_all(state["cuda"])


class CheckpointError(ValueError):
    """A checkpoint that cannot be trusted: corrupt, truncated, non-finite, or incompatible."""


_SEAL = b"rl-recipes-checkpoint sha256="
"""The ZIP archive comment that closes every checkpoint: this prefix, then 64 hex digits."""
_SEAL_LEN = len(_SEAL) + 64
_EOCD = b"PK\x05\x06"  # the ZIP end-of-central-directory record (22 bytes, then the comment)
DATA_ENTRIES = frozenset(
    {"buffer", "collector", "rng", "config", "frames", "wall", "eval_return", "next_eval",
     "next_ckpt", "best"}
)  # fmt: skip
"""Checkpoint entries that hold data or counters, not learned state: not checked for
finiteness (an evaluation return is NaN before the first evaluation)."""


class _HashingFile:
    """A binary file that hashes what is written to it (torch.save writes through it)."""

    def __init__(self, f: Any) -> None:
        self.f, self.sha = f, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        return self.f.write(data)

    def flush(self) -> None:
        self.f.flush()


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` (plus every RNG) atomically, sealed with its SHA-256.

    The file is a plain ``torch.save`` archive (``torch.load`` reads it) whose ZIP comment
    holds the SHA-256 of the archive as written: :func:`load_checkpoint` recomputes it, so a
    flipped byte or a truncated copy is refused. It is written to ``<path>.tmp``, fsynced and
    renamed: a crash mid-write leaves the previous checkpoint whole, and the partial file is
    removed. Learned state holding NaN or inf is refused (the previous checkpoint is kept).

    Raises:
        CheckpointError: a parameter or optimizer entry is NaN or infinite.
        OSError: the disk is full (``no space left on <folder>``), or another write failure.
    """
    path = Path(path)
    state = {**state, "rng": rng_state()}
    _check_finite_state(state, f"refusing to write checkpoint {path}:")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("wb") as f:
            hashing = _HashingFile(f)
            torch.save(state, hashing)  # type: ignore[arg-type]
            f.flush()
            size = f.tell()
            seal = _SEAL + hashing.sha.hexdigest().encode()
            f.seek(size - 2)  # the comment length of the last record, 0 as torch writes it
            f.write(struct.pack("<H", len(seal)) + seal)
            f.flush()
            os.fsync(f.fileno())
        _check_sealed_layout(tmp)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if _is_disk_full(err):
            raise OSError(
                errno.ENOSPC,
                f"no space left on {path.parent} while writing checkpoint {path} (the previous "
                "checkpoint, if any, is intact). Free some space or pass another --output-dir.",
            ) from err
        raise


def _is_disk_full(err: BaseException) -> bool:
    while err is not None:
        if isinstance(err, OSError) and err.errno == errno.ENOSPC:
            return True
        if "No space left on device" in str(err):  # torch's writer wraps it in a RuntimeError
            return True
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    return False


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _check_sealed_layout(path: Path) -> None:
    """The file ends with a ZIP end record whose comment is the seal (torch.save's layout)."""
    with path.open("rb") as f:
        f.seek(-(22 + _SEAL_LEN), os.SEEK_END)
        tail = f.read()
    if tail[:4] != _EOCD or not tail[22:].startswith(_SEAL):
        raise RuntimeError(
            f"torch.save wrote an archive layout save_checkpoint cannot seal: {path}"
        )


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read and verify a checkpoint written by :func:`save_checkpoint`; touch no RNG.

    Verifies the SHA-256 seal (a checkpoint from before seals existed loads with a warning),
    then that every learned tensor is finite (parameters, optimizer moments, ...; the replay
    buffer, collector and RNG entries are data and are not checked).

    Raises:
        FileNotFoundError: no such file.
        CheckpointError: truncated, corrupt (the seal does not match), unreadable, or a
            parameter or optimizer entry holds NaN or inf; the message names the file and entry.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--resume {path}: no such checkpoint file")
    _verify_seal(path)
    try:
        state = torch.load(path, weights_only=False)
    except Exception as err:
        raise CheckpointError(
            f"checkpoint {path} cannot be read ({type(err).__name__}: {err}). Resume from "
            "another checkpoint, or start a fresh run without --resume."
        ) from err
    if not isinstance(state, dict) or "rng" not in state:
        raise CheckpointError(
            f"checkpoint {path} is not a recipe checkpoint (expected a dict with an 'rng' entry, "
            f"got {type(state).__name__}). Pass a checkpoint.pt written by a recipe."
        )
    _check_finite_state(state, f"checkpoint {path}:")
    return state


def _verify_seal(path: Path) -> None:
    size = path.stat().st_size
    with path.open("rb") as f:
        f.seek(max(size - (22 + _SEAL_LEN), 0))
        tail = f.read()
        sealed = (
            len(tail) == 22 + _SEAL_LEN
            and tail[:4] == _EOCD
            and tail[20:22] == struct.pack("<H", _SEAL_LEN)
            and tail[22:].startswith(_SEAL)
        )
        if not sealed:
            if tail[-22:-18] == _EOCD and tail[-2:] == b"\x00\x00":
                warnings.warn(
                    f"checkpoint {path} has no SHA-256 seal (written before seals existed): "
                    "its integrity cannot be verified. The next checkpoint will be sealed.",
                    UserWarning,
                    stacklevel=3,
                )
                return
            raise CheckpointError(
                f"checkpoint {path} is truncated or not a recipe checkpoint: it does not end "
                f"with the SHA-256 seal save_checkpoint writes ({size} bytes). Resume from an "
                "intact copy, or start a fresh run without --resume."
            )
        expected = tail[22 + len(_SEAL) :].decode("ascii", "replace")
        sha = hashlib.sha256()
        f.seek(0)
        remaining = size - _SEAL_LEN - 2
        while remaining > 0:
            chunk = f.read(min(1 << 20, remaining))
            if not chunk:
                break
            sha.update(chunk)
            remaining -= len(chunk)
        sha.update(b"\x00\x00")  # the comment length as torch wrote it, before sealing
    if sha.hexdigest() != expected:
        raise CheckpointError(
            f"checkpoint {path} is corrupt: its SHA-256 is {sha.hexdigest()[:16]}... but it "
            f"was written as {expected[:16]}... (bytes changed on disk or in a copy). Resume "
            "from an intact copy, or start a fresh run without --resume."
        )


def _check_finite_state(state: dict[str, Any], where: str) -> None:
    """Raise a :class:`CheckpointError` naming the first learned entry holding NaN or inf."""
    for key, value in state.items():
        if key in DATA_ENTRIES:
            continue
        bad = _first_non_finite(value, str(key))
        if bad is not None:
            name, count, total = bad
            raise CheckpointError(
                f"{where} the entry {name} holds {count} non-finite value(s) (NaN or inf) out "
                f"of {total}: the run that wrote it had diverged. Resume from an earlier "
                "checkpoint, and lower the learning rate or clip gradients harder."
            )


def _first_non_finite(value: Any, name: str) -> tuple[str, int, int] | None:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            finite = torch.isfinite(value)
            if not bool(finite.all()):
                return name, int((~finite).sum()), value.numel()
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (name, 1, 1)
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, entry in items:
        bad = _first_non_finite(entry, f"{name}.{key}")
        if bad is not None:
            return bad
    return None


def load_checkpoint(path: str | Path, cfg: RunConfig | None = None) -> dict[str, Any]:
    """Read and verify a checkpoint (:func:`read_checkpoint`), check that ``cfg`` may resume
    it (:func:`check_resume_config`), and restore the global RNGs."""
    state = read_checkpoint(path)
    if cfg is not None:
        check_resume_config(cfg, state.get("config", {}), path)
    set_rng_state(state["rng"])
    return state


def check_resume_config(cfg: RunConfig, saved: dict[str, Any], path: str | Path) -> None:
    """The resume rule: a resumed run keeps the hyperparameters it was started with.

    Only the flags in ``cfg.RESUME_MAY_CHANGE`` (the budget, evaluation and checkpoint
    intervals, output folder, threads...) may differ from the checkpoint's config; any other
    difference is refused, naming the flags, so the config saved by the resumed run is
    what actually ran. (The optimizer's state, learning rate included, comes from the
    checkpoint: a new ``--lr`` would otherwise be recorded but not used.)

    Raises:
        CheckpointError: naming each changed flag, its checkpoint value and the given one.
    """
    allowed = getattr(cfg, "RESUME_MAY_CHANGE", frozenset())
    changed = []
    for name, value in dataclasses.asdict(cfg).items():
        if name in allowed or name not in saved:
            continue
        old = saved[name]
        same = old == value or (
            isinstance(old, float) and isinstance(value, float) and math.isnan(old)
            and math.isnan(value)
        )  # fmt: skip
        if not same:
            changed.append(f"--{name.replace('_', '-')} {value!r} (checkpoint: {old!r})")
    if changed:
        raise CheckpointError(
            f"--resume {path}: a resumed run keeps the hyperparameters it was started with, "
            f"but these flags differ from the checkpoint's: {'; '.join(changed)}. Drop them "
            "(or pass the checkpoint's values), or start a fresh run without --resume. Flags "
            f"that may change on resume: {', '.join(sorted(allowed))}."
        )


@dataclasses.dataclass
class RunCounters:
    """Where a run stands: frames done, wall-clock, last evaluation, next evaluation and checkpoint.

    Iterating yields the fields in order, so the older tuple unpacking
    ``frames, wall, eval_return, next_eval, next_ckpt = run_counters(cfg, state)`` still works.
    """

    frames: int
    """Frames collected so far."""
    wall: float
    """Wall-clock seconds so far (carried over resumes)."""
    eval_return: float
    """The latest evaluation's mean return (nan before the first)."""
    next_eval: int
    """Frame count at which the next evaluation happens."""
    next_ckpt: int
    """Frame count at which the next checkpoint is written."""

    def __iter__(self) -> Iterator[Any]:
        return iter(dataclasses.astuple(self))


def run_counters(cfg: RunConfig, state: dict[str, Any] | None = None) -> RunCounters:
    """The run's counters: fresh, or where ``state`` stopped.

    ``state`` is a checkpoint read by :func:`load_checkpoint` (``None`` for a fresh run).

    Example:
        >>> run_counters(RunConfig(eval_every=10, checkpoint_every=20))
        RunCounters(frames=0, wall=0.0, eval_return=nan, next_eval=10, next_ckpt=20)
        >>> frames, wall, eval_return, next_eval, next_ckpt = run_counters(RunConfig())
    """
    if state is None:
        return RunCounters(0, 0.0, float("nan"), cfg.eval_every, cfg.checkpoint_every)
    return RunCounters(
        frames=state["frames"],
        wall=state["wall"],
        eval_return=state.get("eval_return", float("nan")),
        next_eval=state["next_eval"],
        next_ckpt=state["next_ckpt"],
    )


class AttrState:
    """``state_dict`` / ``load_state_dict`` for counters kept in plain attributes of an object.

    Lets a checkpoint treat e.g. a ``HardUpdate``'s ``counter`` like a module's state.

    Example:
        >>> from types import SimpleNamespace
        >>> counter = SimpleNamespace(updates=3)
        >>> AttrState(counter, "updates").state_dict()
        {'updates': 3}
        >>> AttrState(counter, "updates").load_state_dict({"updates": 7}); counter.updates
        7
    """

    def __init__(self, obj: Any, *names: str) -> None:
        missing = [n for n in names if not hasattr(obj, n)]
        if missing:
            raise AttributeError(
                f"{type(obj).__name__} has no attribute(s) {missing} to checkpoint"
            )
        self.obj, self.names = obj, names

    def state_dict(self) -> dict[str, Any]:
        return {name: getattr(self.obj, name) for name in self.names}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name in self.names:
            setattr(self.obj, name, state[name])


def counters_state(
    cfg: RunConfig, *, frames: int, wall: float, eval_return: float, next_eval: int, next_ckpt: int
) -> dict[str, Any]:
    """The run's config and counters, for a checkpoint; :func:`run_counters` reads them back."""
    return {
        "config": dataclasses.asdict(cfg),
        "frames": frames,
        "next_eval": next_eval,
        "next_ckpt": next_ckpt,
        "wall": wall,
        "eval_return": eval_return,
    }


def buffer_state_dict(buffer: Any) -> dict[str, Any]:
    """A replay buffer's contents, write cursor and sampler state (priorities), for a checkpoint."""
    return {
        "storage": buffer.storage.state_dict(),
        "writer": buffer.writer.state_dict(),
        "sampler": buffer.sampler.state_dict(),
    }


def load_buffer_state_dict(buffer: Any, state: dict[str, Any]) -> None:
    """Restore what :func:`buffer_state_dict` saved into a buffer built the same way."""
    buffer.storage.load_state_dict(state["storage"])
    buffer.writer.load_state_dict(state["writer"])
    buffer.sampler.load_state_dict(state["sampler"])


def action_half_range(action_spec: Any) -> float:
    """Half the width of a bounded action spec (the largest over its dimensions).

    Exploration and smoothing noise are given in units of it, as in TD3's paper and
    CleanRL: ``0.1`` means 10% of the action range whatever the task's bounds.

    Example:
        >>> from rl_envs import Bounded
        >>> action_half_range(Bounded(-3.0, 3.0, shape=(1,)))
        3.0
    """
    return float(((action_spec.space.high - action_spec.space.low) / 2).max())


def action_clip(action_spec: Any) -> Any:
    """A transform that clips actions to ``action_spec``'s bounds on their way into the env.

    For an unsquashed Gaussian policy, as SB3 and CleanRL use on MuJoCo: the policy's own
    sample stays in the batch (it is what the loss scores), the env gets it clipped. The
    env outside the transform accepts any real action, so its action spec is unbounded
    (samples beyond the bounds are in spec there, and no out-of-spec warning fires).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_envs import Bounded
        >>> clip = action_clip(Bounded(-1.0, 1.0, shape=(2,)))
        >>> clip.inv(TensorDict(action=torch.tensor([3.0, -0.5])))["action"]
        tensor([ 1.0000, -0.5000])
        >>> from rl_envs import Unbounded
        >>> isinstance(clip.transform_leaf_spec_inv(Bounded(-1.0, 1.0, shape=(2,))), Unbounded)
        True
    """
    from rl_envs import ClipTransform, Unbounded

    class ClipIntoBounds(ClipTransform):
        def transform_leaf_spec_inv(self, spec: Any) -> Any:
            return Unbounded(shape=spec.shape, device=spec.device, dtype=spec.dtype)

    low, high = action_spec.space.low, action_spec.space.high
    if bool((low != low.flatten()[0]).any()) or bool((high != high.flatten()[0]).any()):
        raise ValueError(
            "action_clip needs the same bounds in every action dimension, got "
            f"low={low.tolist()}, high={high.tolist()}; use the tanh-squashed policy instead."
        )
    return ClipIntoBounds(
        in_keys_inv=["action"], low=float(low.flatten()[0]), high=float(high.flatten()[0])
    )


def normalized_env(
    base: Any,
    vecnorm: Any | None,
    *,
    obs_clip: float = float("inf"),
    reward_gamma: float | None = None,
    clip_actions: bool = False,
) -> Any:
    """``base`` behind SB3 VecNormalize's chain, the on-policy recipes' one way to build it.

    Observations normalised by ``vecnorm`` (none when ``None``) and clipped to ``obs_clip``,
    then float32; step counts and episode returns (logged raw); training rewards scaled by
    the discounted return's std when ``reward_gamma`` is given; continuous actions clipped
    to their bounds on the way into the env when ``clip_actions`` (an unsquashed Gaussian).

    Example:
        >>> from rl_envs import VecNorm
        >>> env = normalized_env(make_base_env("Pendulum-v1"), VecNorm(in_keys=["observation"]),
        ...                      obs_clip=10.0, reward_gamma=0.99, clip_actions=True)
        >>> [type(t).__name__ for t in env.transform]  # doctest: +NORMALIZE_WHITESPACE
        ['VecNorm', 'ClipTransform', 'DoubleToFloat', 'StepCounter', 'RewardSum',
         'NormalizeReward', 'ClipIntoBounds']
    """
    from rl_envs import (
        ClipTransform,
        Compose,
        DoubleToFloat,
        NormalizeReward,
        RewardSum,
        StepCounter,
        TransformedEnv,
    )

    transforms: list[Any] = []
    if vecnorm is not None:
        transforms.append(vecnorm)
        if obs_clip != float("inf"):
            transforms.append(ClipTransform(["observation"], low=-obs_clip, high=obs_clip))
    transforms += [DoubleToFloat(), StepCounter(), RewardSum()]
    if reward_gamma is not None:  # after RewardSum: logged returns stay raw
        transforms.append(NormalizeReward(gamma=reward_gamma))
    if clip_actions and base.action_spec.dtype.is_floating_point:
        transforms.append(action_clip(base.action_spec))
    return TransformedEnv(base, Compose(*transforms))


def copy_frozen_stats(source: Any | None, target: Any | None) -> None:
    """Give ``target`` (an evaluation env's VecNorm) ``source``'s statistics, frozen.

    Example:
        >>> from rl_envs import VecNorm
        >>> train, held = VecNorm(in_keys=["observation"]), VecNorm(in_keys=["observation"])
        >>> copy_frozen_stats(train, held); held.frozen
        True
    """
    if source is not None and target is not None:
        target.load_state_dict(source.state_dict())
        target.frozen = True


def stochastic_actor(
    body: nn.Module, action_spec: Any, *, tanh_squash: bool = True, log_std_init: float = 0.0
) -> Any:
    """The on-policy recipes' policy head on ``body`` (observation -> one output per action).

    Discrete specs get a Categorical over ``body``'s logits; continuous ones a Gaussian with a
    state-independent log-std starting at ``log_std_init``, tanh-squashed into the bounds or
    left unsquashed (pair it with ``normalized_env(clip_actions=True)``: SB3, CleanRL).
    Samples carry their log-probability.

    Example:
        >>> from rl_envs import Bounded
        >>> actor = stochastic_actor(nn.Linear(3, 2), Bounded(-1.0, 1.0, shape=(2,)))
        >>> from tensordict import TensorDict
        >>> actor(TensorDict(observation=torch.zeros(3)))["action"].shape
        torch.Size([2])
    """
    from tensordict.nn import TensorDictModule
    from torch.distributions import Categorical

    from rl_modules import (
        AddStateIndependentNormalScale,
        IndependentNormal,
        ProbabilisticActor,
        TanhNormal,
    )

    if not action_spec.dtype.is_floating_point:
        params = TensorDictModule(body, in_keys=["observation"], out_keys=["logits"])
        return ProbabilisticActor(
            params,
            in_keys=["logits"],
            distribution_class=Categorical,
            spec=action_spec,
            return_log_prob=True,
        )
    scale = AddStateIndependentNormalScale(action_spec.shape[-1], init_value=log_std_init)
    params = TensorDictModule(
        nn.Sequential(body, scale), in_keys=["observation"], out_keys=["loc", "scale"]
    )
    return ProbabilisticActor(
        params,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal if tanh_squash else IndependentNormal,
        spec=action_spec,
        return_log_prob=True,
    )


def make_base_env(env: str, num_envs: int = 1, **gym_kwargs: Any) -> Any:
    """The recipes' base env from ``--env``: a Gymnasium id, or ``"module:Class"`` of a native env.

    ``"rl_envs:HalfCheetahEnv"`` (any ``module:Class`` whose class takes ``num_envs``)
    builds that batched env with ``batch_size=[num_envs]``, e.g. the native MuJoCo tasks
    of ``rl_envs.mujoco``. Anything else is a Gymnasium id (Gymnasium's own
    ``"module:EnvId"`` form included) given to ``GymEnv``, a vector env when
    ``num_envs > 1``, with ``gym_kwargs``.

    Example:
        >>> make_base_env("rl_envs:HalfCheetahEnv", num_envs=2).batch_size
        torch.Size([2])
        >>> make_base_env("Pendulum-v1").batch_size
        torch.Size([])
    """
    import importlib

    module_name, _, attr = env.partition(":")
    if attr:
        try:
            native = getattr(importlib.import_module(module_name), attr, None)
        except ImportError:
            native = None
        if isinstance(native, type):
            return native(num_envs=num_envs)
    from rl_envs import GymEnv

    if num_envs > 1:
        return GymEnv(env, num_envs=num_envs, **gym_kwargs)
    return GymEnv(env, **gym_kwargs)


def evaluate(env: Any, policy: Any, episodes: int, seed: int | None = None) -> float:
    """Mean return of ``episodes`` deterministic episodes (mode of the policy, no exploration noise).

    ``seed`` re-seeds ``env`` first, so an evaluation depends on the policy only: the same
    episodes whether the run was resumed or not.
    """
    from tensordict.nn import InteractionType, set_interaction_type

    if seed is not None:
        env.set_seed(seed)
    returns = []
    with torch.no_grad(), set_interaction_type(InteractionType.DETERMINISTIC):
        for _ in range(episodes):
            rollout = env.rollout(1_000_000, policy, break_when_any_done=True)
            returns.append(rollout["next", "reward"].sum().item())
    return sum(returns) / len(returns)


class RunLogger:
    """Scalars to a tidy CSV (frames, name, value) and TensorBoard, plus a tqdm progress bar.

    The bar's total follows the stopping rule: ``total_frames`` when only the budget stops
    the run (an honest ETA); when a finite ``target_return`` can stop it earlier, the bar
    counts frames with no total and no ETA, and says what it runs until.

    Args:
        output_dir: where ``metrics.csv`` and the TensorBoard events go.
        total_frames: the run's budget (the bar's length when no target can stop it early).
        start_frames: frames already done (when resuming).
        target_return: the evaluation return that stops the run early (inf: none).
        unit: what the bar counts.
    """

    def __init__(self, output_dir: Path, total_frames: int, start_frames: int = 0,
                 target_return: float = math.inf, unit: str = "frames") -> None:  # fmt: skip
        from torch.utils.tensorboard import SummaryWriter
        from tqdm import tqdm

        output_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = output_dir / "metrics.csv"
        new_file = not self.csv_path.exists() or start_frames == 0
        if not new_file:  # a resume: rows past the checkpoint will be logged again
            truncate_metrics(self.csv_path, start_frames)
        self._csv_file = self.csv_path.open("w" if new_file else "a", newline="")
        self._csv = csv.writer(self._csv_file)
        if new_file:
            self._csv.writerow(["frames", "name", "value"])
        # TensorBoard hides the events a resumed run logs again (steps after the checkpoint)
        purge = {"purge_step": start_frames + 1} if start_frames > 0 else {}
        self._tb = SummaryWriter(str(output_dir / "tensorboard"), **purge)
        if math.isinf(target_return):
            bar: dict[str, Any] = {"total": total_frames}
        else:  # the target may stop the run at any evaluation: an ETA would be a guess
            bar = {"total": None, "desc": f"until eval >= {target_return:g} (or {total_frames:,})"}
        self._bar = tqdm(initial=start_frames, unit=unit, smoothing=0.1, **bar)
        self.latest: dict[str, float] = {}

    def log(self, frames: int, **scalars: float) -> None:
        for name, value in scalars.items():
            value = float(value)
            self.latest[name] = value
            self._csv.writerow([frames, name, value])
            self._tb.add_scalar(name, value, frames)
        self._csv_file.flush()

    def log_episodes(self, frames: int, batch: Any) -> None:
        """Log ``train/return``: the mean ``episode_reward`` of the episodes ``batch`` finished."""
        finished = batch["next", "done"]
        if finished.any():
            self.log(
                frames, **{"train/return": batch["next", "episode_reward"][finished].mean().item()}
            )

    def advance(self, frames: int) -> None:
        self._bar.update(frames)
        shown = {k: f"{v:.1f}" for k, v in self.latest.items() if k.endswith("return")}
        self._bar.set_postfix(shown, refresh=False)

    def close(self) -> None:
        self._bar.close()
        self._tb.close()
        self._csv_file.close()


def truncate_metrics(csv_path: Path, frames: int) -> int:
    """Drop the rows of ``metrics.csv`` logged after ``frames`` (a resume logs them again).

    Rewritten atomically; returns how many rows were dropped.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "metrics.csv"
        >>> _ = path.write_text("frames,name,value\n10,loss,1.0\n20,loss,0.5\n")
        >>> truncate_metrics(path, 10), path.read_text().splitlines()
        (1, ['frames,name,value', '10,loss,1.0'])
    """
    with csv_path.open(newline="") as f:
        rows = list(csv.reader(f))
    if not rows or rows[0] != ["frames", "name", "value"]:
        raise ValueError(
            f"{csv_path}: expected a metrics.csv with the header frames,name,value, got "
            f"{rows[0] if rows else 'an empty file'}. Move it away or resume into another "
            "--output-dir."
        )
    kept = [row for row in rows[1:] if row and int(row[0]) <= frames]
    dropped = len(rows) - 1 - len(kept)
    if dropped:
        tmp = csv_path.with_name(csv_path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            csv.writer(f).writerows([rows[0], *kept])
        os.replace(tmp, csv_path)
    return dropped


class ScalarMeans:
    """Means of a loss output's scalar entries over the minibatches of one batch, for the log.

    The losses already return their diagnostics (PPO's ``clip_fraction``, ``kl_approx``,
    ``explained_variance``, ``entropy``, ``ESS``); a recipe adds each minibatch's output and
    logs the means once per batch. Non-scalar entries are skipped.

    Example:
        >>> means = ScalarMeans()
        >>> means.add({"kl_approx": torch.tensor(0.1), "loss": torch.tensor(1.0)})
        >>> means.add({"kl_approx": torch.tensor(0.3), "loss": torch.tensor(3.0)})
        >>> {k: round(v, 3) for k, v in means.pop().items()}
        {'kl_approx': 0.2, 'loss': 2.0}
        >>> means.pop()
        {}
    """

    def __init__(self) -> None:
        self._sums: dict[str, torch.Tensor] = {}
        self._counts: dict[str, int] = {}

    def add(self, losses: Any) -> None:
        for name, value in losses.items():
            if isinstance(value, torch.Tensor) and value.numel() == 1:
                value = value.detach().reshape(())
                self._sums[name] = self._sums[name] + value if name in self._sums else value
                self._counts[name] = self._counts.get(name, 0) + 1

    def pop(self) -> dict[str, float]:
        """The means since the last ``pop``, and a fresh start."""
        means = {name: float(total) / self._counts[name] for name, total in self._sums.items()}
        self._sums, self._counts = {}, {}
        return means


def plot_learning_curve(csv_path: Path, png_path: Path, title: str) -> None:
    """Plot every ``*return`` series of ``metrics.csv`` against frames."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, tuple[list[int], list[float]]] = {}
    with csv_path.open() as f:
        for row in csv.DictReader(f):
            if row["name"].endswith("return"):
                xs, ys = series.setdefault(row["name"], ([], []))
                xs.append(int(row["frames"]))
                ys.append(float(row["value"]))
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, (xs, ys) in sorted(series.items()):
        ax.plot(xs, ys, label=name)
    ax.set(xlabel="frames", ylabel="return", title=title)
    ax.grid(alpha=0.3)
    if series:
        ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)


class Stopwatch:
    """Wall-clock that survives a resume: elapsed time carries over in checkpoints."""

    def __init__(self, already: float = 0.0) -> None:
        self._start = time.perf_counter() - already

    def elapsed(self) -> float:
        return time.perf_counter() - self._start


def write_summary(output_dir: Path, **summary: Any) -> str:
    """Write and return the one-line JSON summary printed at the end of a run."""
    line = json.dumps(summary, sort_keys=True)
    (output_dir / "summary.json").write_text(line + "\n")
    return line


def finish_run(
    collector: Any,
    logger: RunLogger,
    clock: Stopwatch,
    out: Path,
    *,
    algo: str,
    env: str,
    frames: int,
    eval_return: float,
    keeper: RunKeeper | None = None,
    snapshot: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, object]:
    """End a run: the final checkpoint (``keeper``, from ``snapshot()``), stop the collector,
    close the logs, plot the curve, print and write the summary, then the line saying why the
    run stopped (exit 130 after a Ctrl-C).

    Returns the summary (``algo``, ``env``, ``frames``, ``wall_clock_s``, ``final_eval_return``;
    with a ``keeper``: ``stop_reason``, ``final_checkpoint``, ``best_checkpoint``).
    """
    ends = keeper.finish(frames, eval_return, snapshot) if keeper is not None else {}
    collector.shutdown()
    logger.close()
    plot_learning_curve(logger.csv_path, out / "learning_curve.png", f"{algo.upper()} {env}")
    summary: dict[str, object] = {
        "algo": algo,
        "env": env,
        "frames": frames,
        "wall_clock_s": round(clock.elapsed(), 1),
        "final_eval_return": eval_return,
        **ends,
    }
    print(write_summary(out, **summary))
    if keeper is not None:
        keeper.announce()
    return summary


# -- run folders: never lose a run -------------------------------------------------------

RUNS_ROOT = Path("runs")
"""Where runs go unless ``--output-dir`` says otherwise: ``runs/<algo>/<start time>``."""
RUN_FILES = ("checkpoint.pt", "best.pt", "summary.json", "metrics.csv")
"""Files that mark a folder as holding a run: reusing it needs ``--resume`` or ``--overwrite``."""
_REPLACED = (*RUN_FILES, "learning_curve.png", "checkpoint.pt.tmp", "best.pt.tmp")


class RunFolderError(SystemExit):
    """The output folder already holds a run and neither ``--resume`` nor ``--overwrite`` was
    given. A usage error, like a bad flag: the script prints the message and exits (code 1)."""


def run_folder(cfg: RunConfig, algo: str) -> Path:
    """This run's folder, created; ``cfg.output_dir`` is set to it. Call it once per run.

    - ``--output-dir D``: ``D`` itself.
    - ``--resume C`` (no ``--output-dir``): the folder of the checkpoint ``C``.
    - otherwise a new ``runs/<algo>/<start time>`` (or ``--run-name``), and
      ``runs/<algo>/latest`` points at it; ``--smoke`` makes ``runs/<algo>/smoke-<start time>``
      and leaves ``latest`` alone, so a smoke test never touches a real run.

    A folder that already holds a run (:data:`RUN_FILES`) is reused only with ``--resume``
    (continue it) or ``--overwrite`` (its run files and TensorBoard events are removed first).

    Raises:
        RunFolderError: the folder holds a run, naming both flags.

    Example:
        >>> import os, tempfile
        >>> os.chdir(tempfile.mkdtemp())
        >>> cfg = RunConfig(run_name="first")
        >>> str(run_folder(cfg, "toy")), os.readlink("runs/toy/latest")
        ('runs/toy/first', 'first')
    """
    done = getattr(cfg, "_run_folder", None)
    if done is not None:
        return done
    root = RUNS_ROOT / algo
    named = not cfg.output_dir and not cfg.resume
    if cfg.output_dir:
        out = Path(cfg.output_dir)
    elif cfg.resume:
        out = Path(cfg.resume).resolve().parent
    elif cfg.run_name:
        out = root / cfg.run_name
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = root / (f"smoke-{stamp}" if cfg.smoke else stamp)
        suffix = 1
        while out.exists():  # two runs started in the same second
            suffix += 1
            out = root / (f"smoke-{stamp}-{suffix}" if cfg.smoke else f"{stamp}-{suffix}")
    held = [name for name in RUN_FILES if (out / name).exists()]
    if held and not cfg.resume and not cfg.overwrite:
        raise RunFolderError(
            f"error: {out} already holds a run ({', '.join(held)}); nothing was written. Pass "
            f"--resume {out / 'checkpoint.pt'} to continue it, --overwrite to replace it, or "
            "another --output-dir (or --run-name) for a new run."
        )
    if cfg.overwrite:
        for name in _REPLACED:
            (out / name).unlink(missing_ok=True)
        shutil.rmtree(out / "tensorboard", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    if named and not cfg.smoke:
        _point_latest(root, out.name)
    cfg.output_dir = str(out)
    object.__setattr__(cfg, "_run_folder", out)
    return out


def _point_latest(root: Path, name: str) -> None:
    """``root/latest`` -> ``name`` (relative), replaced atomically; skipped where symlinks fail."""
    tmp = root / f".latest-{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(name, target_is_directory=True)
        os.replace(tmp, root / "latest")
    except OSError:  # e.g. a file system without symlinks: the run itself is unaffected
        tmp.unlink(missing_ok=True)


class RunKeeper:
    """A run's checkpoints and its end: ``checkpoint.pt`` (periodic, then final), ``best.pt``
    (the best evaluation's), and why the run stopped.

    A recipe's loop gives it a ``snapshot()`` function returning the checkpoint's state
    (everything to resume), saves periodic checkpoints with :meth:`save`, reports each
    evaluation to :meth:`evaluated` (which saves ``best.pt`` when the return is the best so
    far, without the replay buffer), catches ``KeyboardInterrupt`` to set :attr:`interrupted`,
    and ends with :meth:`finish` (the final checkpoint; the summary's fields) and
    :meth:`announce` (the last line: why it stopped).

    Args:
        out: the run's folder.
        cfg: the run's config (its ``target_return``).
        budget: the run's planned length (frames, or steps offline).
        state: the checkpoint resumed from (it carries the best evaluation so far).
        unit: what ``frames`` counts, for the messages ("frames", "gradient steps").
    """

    def __init__(self, out: Path, cfg: RunConfig, budget: int, state: dict[str, Any] | None = None,
                 unit: str = "frames") -> None:  # fmt: skip
        self.out, self.target, self.budget, self.unit = out, cfg.target_return, budget, unit
        best = (state or {}).get("best") or {}
        self.best_return: float = best.get("eval_return", -math.inf)
        self.best_frames: int | None = best.get("frames")
        self.saved_frames: int | None = (state or {}).get("frames")
        self.interrupted = False
        self._reason = ""
        until = f"{budget:,} {unit}"
        if not math.isinf(self.target):
            until = f"eval return >= {self.target:g} or {until}"
        print(f"run folder {out}: training until {until}; Ctrl-C stops and saves", flush=True)

    @property
    def path(self) -> Path:
        """The periodic and final checkpoint, ``<out>/checkpoint.pt``."""
        return self.out / "checkpoint.pt"

    @property
    def best_path(self) -> Path:
        """The best evaluation's checkpoint, ``<out>/best.pt``."""
        return self.out / "best.pt"

    def _best_entry(self) -> dict[str, Any]:
        return {"eval_return": self.best_return, "frames": self.best_frames}

    def save(self, state: dict[str, Any]) -> None:
        """Write ``state`` (a snapshot) to ``checkpoint.pt``, with the best evaluation so far."""
        save_checkpoint(self.path, {**state, "best": self._best_entry()})
        self.saved_frames = state.get("frames")

    def evaluated(self, frames: int, eval_return: float,
                  snapshot: Callable[[], dict[str, Any]]) -> None:  # fmt: skip
        """Record an evaluation; a new best writes ``best.pt`` (the snapshot, no replay buffer)."""
        if not eval_return > self.best_return:  # NaN never counts as best
            return
        self.best_return, self.best_frames = eval_return, frames
        state = {k: v for k, v in snapshot().items() if k != "buffer"}
        save_checkpoint(self.best_path, {**state, "best": self._best_entry()})

    def finish(self, frames: int, eval_return: float,
               snapshot: Callable[[], dict[str, Any]] | None) -> dict[str, Any]:  # fmt: skip
        """Save the final checkpoint (unless the last one is already at ``frames``); return the
        summary's fields: why the run stopped, and both checkpoints."""
        final_saved = True
        if snapshot is not None and self.saved_frames != frames:
            try:
                self.save(snapshot())
            except (Exception, KeyboardInterrupt) as err:  # a second Ctrl-C, a dead worker
                final_saved = False
                print(f"could not save the final checkpoint ({type(err).__name__}: {err})",
                      file=sys.stderr)  # fmt: skip
        if self.interrupted:
            reason = "interrupted"
            self._reason = f"interrupted (Ctrl-C) at {frames:,} {self.unit}"
        elif eval_return >= self.target:
            reason = "target_reached"
            self._reason = (f"target reached at {frames:,} {self.unit}: eval return "
                            f"{eval_return:.1f} >= {self.target:g}")  # fmt: skip
        else:
            reason = "budget_done"
            self._reason = f"budget done: {frames:,} of {self.budget:,} {self.unit}"
        if final_saved and self.path.is_file():
            self._reason += f"; final checkpoint {self.path}"
        if self.best_frames is not None:
            self._reason += (f"; best {self.best_path} (eval return {self.best_return:.1f} at "
                             f"{self.best_frames:,} {self.unit})")  # fmt: skip
        return {
            "stop_reason": reason,
            "final_checkpoint": {
                "path": str(self.path) if self.path.is_file() else None,
                "frames": self.saved_frames,
                "eval_return": eval_return,
            },
            "best_checkpoint": {
                "path": str(self.best_path) if self.best_frames is not None else None,
                "frames": self.best_frames,
                "eval_return": self.best_return if self.best_frames is not None else None,
            },
        }

    def announce(self) -> None:
        """Print the run's last line, why it stopped; exit with 130 (as Ctrl-C) if interrupted."""
        print(f"stopped: {self._reason}", flush=True)
        if self.interrupted:
            raise SystemExit(130)
