"""Prioritized slices: the anchor step is drawn by priority, the slice around it."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from rl_buffers._layout import NestedKey
from rl_buffers.samplers.base import check_not_empty
from rl_buffers.samplers.prioritized import PrioritizedSampler
from rl_buffers.samplers.slice import SliceSampler
from rl_buffers.segment_tree import Backend
from rl_buffers.storages.base import Storage


class PrioritizedSliceSampler(SliceSampler):
    """Slices whose anchor step is sampled with probability ``∝ p^alpha``.

    Each slice contains its anchor and stays inside the anchor's trajectory.
    Every sampled step carries its own importance weight ``(p_i / p_min)^-beta``
    under ``info["priority_weight"]``; update priorities with the samples' ``index``.

    Args:
        max_capacity, alpha, beta, eps, dtype, reduction, backend: as in
            :class:`PrioritizedSampler`.
        num_slices, slice_len, end_key, traj_key, truncated_key, init_key,
        strict_length, cache_values: as in :class:`SliceSampler`.
        span: as in :class:`SliceSampler`, right side only: a slice starts at its anchor, so
            a left span is turned off with a warning (as in TorchRL).
        replacement: ``False`` raises a ``TypeError``: there is no prioritized
            without-replacement variant.

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage
        >>> storage = LazyTensorStorage(8)
        >>> storage.set(slice(0, 8), TensorDict(traj=torch.arange(8) // 4, batch_size=[8]))
        >>> sampler = PrioritizedSliceSampler(8, 1.0, 1.0, slice_len=2, traj_key="traj", backend="torch")
        >>> sampler.extend(torch.arange(8))
        >>> sampler.update_priority(torch.arange(8), torch.tensor([0.0] * 7 + [1.0]))
        >>> sampler.sample(storage, 2)[0].tolist()
        [6, 7]
    """

    def __init__(
        self,
        max_capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float32,
        reduction: str = "max",
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        end_key: NestedKey | None = None,
        traj_key: NestedKey | None = None,
        truncated_key: NestedKey | None = ("next", "truncated"),
        init_key: NestedKey | None = "is_init",
        strict_length: bool = True,
        backend: Backend = "auto",
        cache_values: bool = False,
        span: bool | int | tuple[bool | int, bool | int] = False,
        max_priority_within_buffer: bool = False,
        replacement: bool = True,
    ) -> None:
        super().__init__(num_slices=num_slices, slice_len=slice_len, end_key=end_key, traj_key=traj_key,
                         truncated_key=truncated_key, init_key=init_key, strict_length=strict_length,
                         cache_values=cache_values, span=span, replacement=replacement)  # fmt: skip
        if self.span[0]:
            warnings.warn(
                f"PrioritizedSliceSampler: span={span!r} asks for a left span, which is turned off "
                "(slices start at their prioritized anchor); only the right span is kept.",
                stacklevel=2,
            )
            self.span = (False, self.span[1])
        self.priority = PrioritizedSampler(
            max_capacity, alpha, beta, eps, dtype, reduction, backend=backend,
            max_priority_within_buffer=max_priority_within_buffer,
        )  # fmt: skip

    @property
    def _max_priority(self) -> tuple[float, int | None]:
        """The default priority and its position (see :class:`PrioritizedSampler`)."""
        return self.priority._max_priority

    def extend(self, index: torch.Tensor, storage: Storage | None = None) -> None:
        super().extend(index, storage)
        self.priority.extend(index, storage)

    def update_priority(self, index: Any, priority: Any, storage: Storage | None = None) -> None:
        self.priority.update_priority(index, priority, storage)

    def _to_flat(self, storage: Storage, index: torch.Tensor) -> torch.Tensor:
        if storage.ndim == 1:
            return index
        return index[..., 0] * storage.shape[1] + index[..., 1]

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        check_not_empty(storage)
        n_slices, slice_len = self._shape(batch_size)
        trajs = self.trajectories(storage)
        ok = torch.zeros(trajs.length.numel(), dtype=torch.bool)
        ok[self._eligible(trajs, slice_len)] = True
        anchors = torch.empty(0, dtype=torch.long)
        for _ in range(32):  # rejection: anchors in too-short trajectories are drawn again
            index, _ = self.priority.sample(storage, n_slices)
            flat = self._to_flat(storage, index).cpu()
            flat = flat[ok[trajs.traj_of[flat]]]
            anchors = torch.cat([anchors, flat])[:n_slices]
            if anchors.numel() == n_slices:
                break
        else:
            raise RuntimeError(
                f"PrioritizedSliceSampler: could not draw {n_slices} anchors in trajectories of "
                f">= {slice_len} steps: their priorities are (nearly) zero. Lower slice_len or pass "
                "strict_length=False."
            )
        chosen = trajs.traj_of[anchors]
        flat, info = self._slices(trajs, chosen, slice_len, anchor=anchors)
        index = storage.unravel(flat)
        positions = index if storage.ndim == 1 else storage.flat_position(index)
        p = self.priority._sum_tree[positions.to(self.priority.device)]
        end = len(storage) if storage.ndim == 1 else self.priority.max_capacity
        p_min = self.priority._min_tree.query(0, end)
        info["priority_weight"] = torch.pow(p / p_min, -self.priority.beta)
        self._end_flags(storage, index, info)
        return index, info

    def empty(self) -> None:
        self.priority.empty()

    def state_dict(self) -> dict:
        return self.priority.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.priority.load_state_dict(state)
