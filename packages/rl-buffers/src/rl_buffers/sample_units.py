"""Sample units: what each index a sampler draws (an anchor) expands into.

A sampler decides which anchors a batch gets; a sample unit decides what each
anchor becomes: one transition (:class:`Transition`, the default) or a window
of consecutive steps around it (:class:`Sequence`). The buffer calls
``unit.expand(index, info, storage)`` between the sampler and the storage read,
so ``info["index"]`` and the batch are the expanded ones.
"""

from __future__ import annotations

import abc
from typing import Any, Literal

import torch
from tensordict.utils import NestedKey

from rl_buffers.storages.base import Storage
from rl_buffers.trajectory_bounds import find_start_stop_traj

Boundary = Literal["pad", "stop", "include_reset"]


class SampleUnit(abc.ABC):
    """Turns the anchors a sampler drew into the records of the batch.

    ``expand(index, info, storage)`` returns the new ``(index, info)``: per-anchor
    info entries must be expanded with the index, and entries it adds (masks,
    provenance) reach ``sample(return_info=True)`` and, for TensorDict samples,
    the batch itself. It must not change the storage.
    """

    @abc.abstractmethod
    def expand(
        self, index: torch.Tensor, info: dict[str, Any], storage: Storage
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """The expanded index (``[n]``, or ``[n, 2]`` for 2-d storages) and info."""


class Transition(SampleUnit):
    """One anchor, one transition: the classic behaviour (and the default).

    Examples:
        >>> Transition().expand(torch.tensor([3, 1]), {}, None)
        (tensor([3, 1]), {})
    """

    def expand(
        self, index: torch.Tensor, info: dict[str, Any], storage: Storage
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        return index, info


def _expand_info(info: dict[str, Any], anchors: int, total: int) -> dict[str, Any]:
    """Per-anchor entries repeated ``total`` times each; other entries as they are."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, torch.Tensor) and value.ndim and value.shape[0] == anchors:
            value = value.repeat_interleave(total, dim=0)
        out[key] = value
    return out


class Sequence(SampleUnit):
    """Each anchor becomes a window of ``burn_in + length + bootstrap`` steps of its time line.

    The window is ``burn_in`` steps before the anchor, the ``length`` steps of the
    learning region starting at it, then ``bootstrap`` steps, every ``dilation``-th
    stored step. Episode ends are read from ``done_key`` (``None``: the whole written
    line is one episode). Steps outside the anchor's episode (or the written data)
    are clamped to its first / last step and marked invalid; burn-in never moves
    the anchor. At the end of an episode:

    - ``"pad"``: the window keeps its anchor; steps past the end repeat the last one.
    - ``"stop"``: the window moves back so that it ends on the episode's last step
      (padding only if the episode is too short).
    - ``"include_reset"``: the window runs on into the next episode; only the write
      seam (newest -> oldest item of a full ring) and unwritten slots stop it.

    ``info`` gets, per record: ``"sequence_id"`` (the anchor's number),
    ``"step_in_sequence"``, ``"validity_mask"``, ``"learning_mask"`` (True on the
    learning region) and ``"anchor_index"`` (the anchor drawn, so that priorities go
    to anchors: :meth:`TensorDictReplayBuffer.update_tensordict_priority` writes the
    max over each anchor's valid records). A batch of ``B`` anchors has
    ``B * (burn_in + length + bootstrap)`` records. Needs a tensor storage of
    TensorDicts; on ``[envs, time]`` storages windows run along time in the anchor's env.

    Args:
        length: steps of the learning region (>= 1).
        episode_boundary: ``"pad"``, ``"stop"`` or ``"include_reset"``.
        done_key: the end-of-episode flag; ``None``: no episode ends.
        burn_in: steps before the anchor (>= 0).
        bootstrap: steps after the learning region (>= 0).
        dilation: stored steps between two records of the window (>= 1).

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage, TensorDictReplayBuffer
        >>> done = torch.zeros(10, 1, dtype=torch.bool)
        >>> done[4] = done[9] = True
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=2, sample_unit=Sequence(3))
        >>> _ = rb.extend(TensorDict({"obs": torch.arange(10.0), ("next", "done"): done}, [10]))
        >>> rb.sample()["obs"].shape
        torch.Size([6])
        >>> index, info = Sequence(length=2, burn_in=1, bootstrap=1).expand(torch.tensor([5]), {}, rb.storage)
        >>> index.tolist(), info["validity_mask"].tolist(), info["learning_mask"].tolist()
        ([5, 5, 6, 7], [False, True, True, True], [False, True, True, False])
    """

    def __init__(
        self,
        length: int,
        episode_boundary: Boundary = "pad",
        done_key: NestedKey | None = ("next", "done"),
        burn_in: int = 0,
        bootstrap: int = 0,
        dilation: int = 1,
    ) -> None:
        if length < 1:
            raise ValueError(f"length must be >= 1, got {length}.")
        if episode_boundary not in ("pad", "stop", "include_reset"):
            raise ValueError(
                f"episode_boundary must be 'pad', 'stop' or 'include_reset'; got {episode_boundary!r}."
            )
        if burn_in < 0 or bootstrap < 0:
            raise ValueError(f"burn_in and bootstrap must be >= 0; got {burn_in}, {bootstrap}.")
        if dilation < 1:
            raise ValueError(f"dilation must be >= 1, got {dilation}.")
        self.length = length
        self.episode_boundary = episode_boundary
        self.done_key = (
            done_key if done_key is None or isinstance(done_key, str) else tuple(done_key)
        )
        self.burn_in = burn_in
        self.bootstrap = bootstrap
        self.dilation = dilation
        self._cache: tuple[Any, torch.Tensor, torch.Tensor] | None = None

    def __repr__(self) -> str:
        return (f"Sequence(length={self.length}, episode_boundary={self.episode_boundary!r}, "
                f"burn_in={self.burn_in}, bootstrap={self.bootstrap}, dilation={self.dilation})")  # fmt: skip

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": None}

    def _check(self, storage: Storage) -> None:
        layout = getattr(storage, "layout", None)
        if not hasattr(storage, "get_leaf"):
            raise TypeError(
                f"Sequence needs a TensorStorage of TensorDicts (LazyTensorStorage, "
                f"LazyMemmapStorage) to read episode ends; got a {type(storage).__name__}."
            )
        if layout is not None and layout.kind != "tensordict":
            raise TypeError(
                f"Sequence needs the TensorStorage to hold TensorDicts (to read {self.done_key!r}); "
                f"it holds {layout.kind} data."
            )

    def _episode_distances(self, storage: Storage) -> tuple[torch.Tensor, torch.Tensor]:
        """Per stored step ``[envs, T]``: steps since its episode's start, steps to its stop."""
        key = (id(storage), storage.write_count, len(storage), self.done_key)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1], self._cache[2]
        envs, steps = (1, len(storage)) if storage.ndim == 1 else tuple(storage.shape)
        if self.done_key is None:
            done = torch.zeros(envs, steps, dtype=torch.bool)
        else:
            done = storage.get_leaf(self.done_key).cpu().reshape(envs, steps, -1).any(-1)
        full = steps == storage.write_capacity(None)
        start, _, lengths = find_start_stop_traj(
            end=done.T, at_capacity=full, cursor=(storage.last_cursor - 1) % steps
        )
        owner = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
        within = torch.arange(owner.numel()) - torch.repeat_interleave(
            lengths.cumsum(0) - lengths, lengths
        )
        rows = (start[owner, 0] + within) % steps
        env = start[owner, 1]
        since, until = (
            torch.empty(envs, steps, dtype=torch.long),
            torch.empty(envs, steps, dtype=torch.long),
        )
        since[env, rows] = within
        until[env, rows] = lengths[owner] - 1 - within
        self._cache = (key, since, until)
        return since, until

    def _seam_distances(
        self, storage: Storage, time: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Steps from the oldest written step to ``time``, and from ``time`` to the newest."""
        steps = len(storage) if storage.ndim == 1 else storage.shape[1]
        full = steps == storage.write_capacity(None)
        newest = (storage.last_cursor - 1) % steps
        oldest = (newest + 1) % steps if full else 0
        return (time - oldest) % steps, (newest - time) % steps

    def expand(
        self, index: torch.Tensor, info: dict[str, Any], storage: Storage
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        self._check(storage)
        anchor = torch.as_tensor(index)
        device = anchor.device
        two_d = storage.ndim == 2
        if two_d and (anchor.ndim != 2 or anchor.shape[-1] != 2):
            raise ValueError(
                f"a 2-d storage's anchors are [n, 2] (env, time); got {tuple(anchor.shape)}."
            )
        anchors = anchor.shape[0]
        env = anchor[:, 0].cpu() if two_d else torch.zeros(anchors, dtype=torch.long)
        time = (anchor[:, 1] if two_d else anchor).cpu()
        total = self.burn_in + self.length + self.bootstrap
        offset = (torch.arange(total) - self.burn_in) * self.dilation  # [total]
        if self.episode_boundary == "include_reset":
            before, after = self._seam_distances(storage, time)
            start_time = time
        else:
            since, until = self._episode_distances(storage)
            before, after = since[env, time], until[env, time]
            start_time = time
            if self.episode_boundary == "stop":
                needed = self.dilation * (self.length + self.bootstrap - 1)
                shift = torch.minimum((needed - after).clamp_min(0), before)
                start_time, before, after = time - shift, before - shift, after + shift
        low, high = -before.unsqueeze(1), after.unsqueeze(1)
        valid = (offset >= low) & (offset <= high)
        steps = len(storage) if storage.ndim == 1 else storage.shape[1]
        rows = (start_time.unsqueeze(1) + torch.minimum(torch.maximum(offset, low), high)) % steps
        rows = rows.reshape(-1)
        expanded = torch.stack([env.repeat_interleave(total), rows], -1) if two_d else rows
        out = _expand_info(info, anchors, total)
        out["sequence_id"] = torch.arange(anchors, device=device).repeat_interleave(total)
        out["step_in_sequence"] = torch.arange(total, device=device).repeat(anchors)
        learning = (offset >= 0) & (offset < self.length * self.dilation)
        out["learning_mask"] = learning.repeat(anchors).to(device)
        out["validity_mask"] = valid.reshape(-1).to(device)
        out["anchor_index"] = anchor.repeat_interleave(total, dim=0)
        return expanded.to(device), out
