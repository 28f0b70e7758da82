"""Pieces every collector shares: timings, frame planning, finishing a batch."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_collectors.split import split_trajectories

TRAJ_IDS_KEY: tuple[str, str] = ("collector", "traj_ids")
MASK_KEY: tuple[str, str] = ("collector", "mask")
# TorchRL's PolicyVersion transform writes the version as an observation: at the root and in "next".
POLICY_VERSION_KEYS: tuple[str | tuple[str, str], ...] = (
    "policy_version",
    ("next", "policy_version"),
)


@dataclass(frozen=True)
class BatchTimings:
    """Where the time of one batch went, in seconds.

    For multiprocess and Ray collectors ``env_s`` and ``policy_s`` are the
    largest values among the workers of that batch and ``total_s`` is the wall
    time the trainer waited for the batch.

    When a batch comes from one ``env.rollout`` call (``fused=True``, see
    :class:`~rl_collectors.Collector`'s ``use_env_rollout``), the env runs the policy
    inside its own loop: ``env_s`` then holds env and policy time together and
    ``policy_s`` is ``0.0``.

    Attributes:
        frames: frames in the batch.
        env_s: time spent in ``env.step`` / resets.
        policy_s: time spent in the policy (or drawing random actions).
        total_s: wall time of the whole batch.
        fused: ``env_s`` includes the policy (the batch came from ``env.rollout``).
    """

    frames: int
    env_s: float
    policy_s: float
    total_s: float
    fused: bool = False

    @property
    def fps(self) -> float:
        """Frames per second of the batch."""
        return self.frames / self.total_s if self.total_s > 0 else math.inf


def merge_timings(frames: int, parts: list[BatchTimings], started: float) -> BatchTimings:
    """One batch's timings from its workers' (the slowest worker's env and policy time)."""
    return BatchTimings(
        frames=frames,
        env_s=max((t.env_s for t in parts), default=0.0),
        policy_s=max((t.policy_s for t in parts), default=0.0),
        total_s=time.perf_counter() - started,
        fused=any(t.fused for t in parts),
    )


def fit_frames(frames_per_batch: int, total_frames: int, unit: int, what: str) -> tuple[int, int]:
    """Frame counts rounded up to whole steps of ``unit`` frames, as TorchRL does.

    A ``frames_per_batch`` or ``total_frames`` that is not a multiple of ``unit`` (the
    frames one step of every env gives) is rounded up with a ``UserWarning``: the
    collector gathers the few extra frames rather than refusing the arguments.

    Returns:
        ``(frames_per_batch, total_frames)``, each a multiple of ``unit`` (``-1`` stays ``-1``).

    Raises:
        ValueError: a non-positive ``frames_per_batch`` or ``total_frames`` (other than ``-1``).
    """
    if frames_per_batch <= 0:
        raise ValueError(f"frames_per_batch must be > 0; got {frames_per_batch}.")
    if total_frames == 0 or total_frames < -1:
        raise ValueError(f"total_frames must be -1 (endless) or > 0; got {total_frames}.")
    fitted = -(-frames_per_batch // unit) * unit
    if fitted != frames_per_batch:
        warnings.warn(
            f"frames_per_batch={frames_per_batch} is not a multiple of {unit} ({what}); it is "
            f"rounded up to {fitted}. Pass a multiple of {unit} to silence this warning.",
            UserWarning,
            stacklevel=3,
        )
    total = total_frames if total_frames < 0 else -(-total_frames // unit) * unit
    if total != total_frames:
        warnings.warn(
            f"total_frames={total_frames} is not a multiple of {unit} ({what}); {total} frames "
            f"will be collected. Pass a multiple of {unit} to silence this warning.",
            UserWarning,
            stacklevel=3,
        )
    return fitted, total


def frames_for_next_batch(frames_per_batch: int, total_frames: int, frames_done: int) -> int:
    """Frames the next batch should hold: a full batch, or what is left of ``total_frames``."""
    if total_frames < 0:
        return frames_per_batch
    return max(0, min(frames_per_batch, total_frames - frames_done))


def finish_batch(
    batch: TensorDictBase,
    *,
    split_trajs: bool,
    flatten: bool,
    postproc: Callable[[TensorDictBase], TensorDictBase] | None,
    replay_buffer: Any | None,
    extend_buffer: bool = True,
    keep_traj_ids: bool = True,
    exclude_private_keys: bool = False,
) -> TensorDictBase | None:
    """Split / flatten / post-process a batch, then hand it to the replay buffer if any
    (whole, or one time step ``batch[..., t]`` at a time when ``extend_buffer=False``).
    ``keep_traj_ids=False`` drops ``("collector", "traj_ids")`` (and an emptied ``"collector"``);
    ``exclude_private_keys`` drops every key with a part starting with ``"_"`` (after ``postproc``).

    Returns:
        The batch, or ``None`` when it went to ``replay_buffer`` (TorchRL's behaviour).
    """
    if split_trajs:
        batch = split_trajectories(batch)
    if not keep_traj_ids:
        batch = batch.exclude(TRAJ_IDS_KEY)
        if not batch.get("collector").keys():
            batch = batch.exclude("collector")
    if flatten:
        batch = batch.reshape(-1)
        if MASK_KEY in batch.keys(include_nested=True):
            batch = batch[batch.get(MASK_KEY)]
    if postproc is not None:
        batch = postproc(batch)
    if exclude_private_keys:
        batch = drop_private_keys(batch)
    if replay_buffer is not None:
        if extend_buffer or flatten:
            replay_buffer.extend(batch)
        else:
            for step in batch.unbind(-1):
                replay_buffer.extend(step.reshape(-1))
        return None
    return batch


def _is_private(key: Any) -> bool:
    parts = (key,) if isinstance(key, str) else key
    return any(part.startswith("_") for part in parts)


def drop_private_keys(batch: TensorDictBase) -> TensorDictBase:
    """``batch`` without the keys that have a part starting with ``"_"`` (TorchRL's collectors
    hand out no private entry, e.g. an exploration module's ``"_ou_prev_noise"``).

    Example:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"obs": 0, "_noise": 1, "out": {"_x": 2, "y": 3}})
        >>> sorted(drop_private_keys(td).keys(True, True))
        ['obs', ('out', 'y')]
    """
    private = [key for key in batch.keys(True) if _is_private(key)]
    return batch.exclude(*private) if private else batch


def check_options(
    split_trajs: bool,
    flatten: bool,
    *,
    reset_when_done: bool = True,
    replay_buffer: Any | None = None,
    extend_buffer: bool = True,
    postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
) -> None:
    """Reject option combinations that have no meaning (and TorchRL's retired ones)."""
    if not reset_when_done:
        raise ValueError(
            "reset_when_done=False is not supported (deprecated in TorchRL too): sub-envs that "
            "are done are always reset; drop the argument."
        )
    if replay_buffer is not None and not extend_buffer and (postproc is not None or split_trajs):
        raise ValueError(
            "extend_buffer=False writes each step to the replay buffer as it comes, so postproc "
            "and split_trajs (which need the whole batch) must be None/False; set extend_buffer=True."
        )
    if split_trajs and flatten:
        raise ValueError(
            "split_trajs=True and flatten=True both reshape the batch; pick one "
            "(split_trajs gives [N, T_max] with a mask, flatten gives [frames])."
        )


def make_progress_bar(enabled: bool, total_frames: int, start: int = 0) -> Any:
    """A tqdm bar counting frames, or ``None`` when disabled."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total_frames if total_frames > 0 else None, initial=start, unit="frames")


def mark_invalid_tail(batch: TensorDictBase, valid_steps: list[int]) -> None:
    """For a stacked ``[W, *B, T]`` batch: flag steps past ``valid_steps[w]`` as not collected.

    Their trajectory id becomes ``-1`` and ``("collector", "mask")`` is ``False``.
    """
    steps = batch.shape[-1]
    mask = torch.zeros(batch.shape, dtype=torch.bool, device=batch.device)
    traj_ids = batch.get(TRAJ_IDS_KEY)
    for worker, valid in enumerate(valid_steps):
        mask[worker, ..., :valid] = True
        if valid < steps:
            traj_ids[worker, ..., valid:] = -1
    batch.set(MASK_KEY, mask)
