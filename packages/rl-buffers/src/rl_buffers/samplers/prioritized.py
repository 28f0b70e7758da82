"""Proportional prioritized sampling (Schaul et al., 2016, arXiv:1511.05952)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from rl_buffers.samplers.base import Sampler, check_not_empty
from rl_buffers.segment_tree import Backend, MinSegmentTree, SumSegmentTree
from rl_buffers.storages.base import Storage


def check_priority(priority: torch.Tensor) -> None:
    """Raises ``ValueError`` if any priority is negative or not finite (nothing is written)."""
    if priority.numel() == 0:
        return
    # Two reductions settle the common case: min is NaN if any entry is, and a finite
    # sum of values >= 0 excludes inf. Only a suspicious update pays the elementwise check.
    if float(priority.min()) >= 0 and math.isfinite(float(priority.sum())):
        return
    bad = ~torch.isfinite(priority) | (priority < 0)
    if bool(bad.any()):
        where = bad.reshape(-1).nonzero().squeeze(-1)[:5].tolist()
        values = priority.reshape(-1)[where].tolist()
        raise ValueError(
            f"priorities must be finite and >= 0; got {values} at positions {where} of the update "
            "(NaN usually means a diverged loss: check td_error). No priority was updated."
        )


class PrioritizedSampler(Sampler):
    """Samples item ``i`` with probability ``p_i^alpha / sum_j p_j^alpha``.

    Stored priorities are ``(p + eps) ** alpha`` in a sum tree (for sampling)
    and a min tree (for the weights). New items get the largest raw priority
    seen so far (1.0 at first). Each sample carries the importance weight
    ``w_i = (N P(i))^-beta / max_j (N P(j))^-beta = (p_i / p_min)^-beta``
    under ``info["priority_weight"]``.

    Args:
        max_capacity: number of leaves (the storage's ``max_size``).
        alpha: prioritization exponent (0 = uniform).
        beta: importance-sampling exponent (1 = full correction).
        eps: added to every priority so none is zero.
        dtype: of the trees, ``torch.float32`` or ``torch.float64``.
        reduction: how ``update_tensordict_priority`` reduces per-item
            priorities with extra dims: ``"max"``, ``"min"``, ``"sum"``, ``"mean"``.
        device: where the trees live (CUDA trees use the CUDA kernels).
        backend: segment-tree kernels, ``"auto"`` | ``"torch"`` | ``"cpp"`` | ``"cuda"``.
        max_priority_within_buffer: the priority of new items is the largest among the items
            stored now (it falls when that item is overwritten or lowered), instead of the
            largest ever seen.
        replacement: TorchRL's switch to a without-replacement variant; ``False`` raises
            a ``TypeError`` (there is none).

    Examples:
        >>> from rl_buffers import LazyTensorStorage
        >>> storage = LazyTensorStorage(4)
        >>> storage.set(slice(0, 4), torch.zeros(4))
        >>> sampler = PrioritizedSampler(4, alpha=1.0, beta=1.0, backend="torch")
        >>> sampler.extend(torch.arange(4))
        >>> sampler.update_priority(torch.tensor([0, 1, 2, 3]), torch.tensor([0.0, 0.0, 0.0, 1.0]))
        >>> index, info = sampler.sample(storage, 5)
        >>> index.tolist()
        [3, 3, 3, 3, 3]
    """

    def __init__(
        self,
        max_capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float32,
        reduction: str = "max",
        device: torch.device | str | None = None,
        backend: Backend = "auto",
        max_priority_within_buffer: bool = False,
        *,
        replacement: bool = True,
    ) -> None:
        if not replacement:
            raise TypeError(
                "PrioritizedSampler has no without-replacement variant: prioritized draws are "
                "with replacement; use SamplerWithoutReplacement for epochs over the data."
            )
        if alpha < 0:
            raise ValueError(f"alpha must be greater or equal to 0, got {alpha}.")
        if beta < 0:
            raise ValueError(f"beta must be >= 0, got {beta}.")
        if eps < 0:
            raise ValueError(f"eps must be >= 0, got {eps}.")
        if reduction not in ("max", "min", "sum", "mean", "median"):
            raise ValueError(
                f"reduction must be 'max', 'min', 'sum', 'mean' or 'median', got {reduction!r}."
            )
        self.max_capacity = int(max_capacity)
        self._alpha, self.beta, self.eps = float(alpha), float(beta), float(eps)
        self.dtype = dtype
        self.reduction = reduction
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self._sum_tree = SumSegmentTree(
            self.max_capacity, dtype=dtype, device=self.device, backend=backend
        )
        self._min_tree = MinSegmentTree(
            self.max_capacity, dtype=dtype, device=self.device, backend=backend
        )
        self.backend = self._sum_tree.backend
        self._max_value = 1.0
        self.max_priority_within_buffer = max_priority_within_buffer
        # within-buffer mode keeps the raw priorities (-inf where nothing is stored) and
        # where the largest sits, to recompute it when that item is overwritten or lowered
        self._raw = (
            torch.full((self.max_capacity,), -math.inf, dtype=torch.float64)
            if max_priority_within_buffer
            else None
        )
        self._max_position = -1

    @property
    def alpha(self) -> float:
        """The prioritization exponent. Setting it re-expresses the stored ``(p + eps) ** alpha``
        in the new exponent (annealing keeps sampling exact); from ``alpha == 0`` the raw
        priorities are lost, so the stored values stay uniform until updated (with a warning).
        """
        return self._alpha

    @alpha.setter
    def alpha(self, value: float) -> None:
        value = float(value)
        if value < 0:
            raise ValueError(f"alpha must be greater or equal to 0, got {value}.")
        old = self._alpha
        if value == old:
            return
        written = torch.isfinite(self._min_tree.values())
        if bool(written.any()):
            if old == 0:
                warnings.warn(
                    "PrioritizedSampler: changing alpha away from 0 cannot recover the raw "
                    "priorities (every stored value is 1): they stay uniform until updated.",
                    UserWarning,
                    stacklevel=2,
                )
            else:
                positions = written.nonzero().squeeze(-1)
                stored = self._sum_tree.values()[positions].double()
                value_new = stored.pow(value / old).to(self.dtype)
                self._sum_tree.update_checked(positions, value_new)
                self._min_tree.update_checked(positions, value_new)
        self._alpha = value

    @property
    def _eps(self) -> float:
        """TorchRL's name of :attr:`eps`."""
        return self.eps

    @property
    def _max_capacity(self) -> int:
        """TorchRL's name of :attr:`max_capacity`."""
        return self.max_capacity

    @property
    def _max_priority(self) -> tuple[float, int | None]:
        """The raw priority new items get and where it sits (TorchRL's pair; the position
        is tracked with ``max_priority_within_buffer=True`` only)."""
        position = self._max_position if self._raw is not None else None
        return self._max_value, position

    def mark_update(self, index: torch.Tensor, storage: Storage | None = None) -> None:
        """Gives the items at ``index`` the default (largest) priority, as a write does."""
        self.extend(index, storage)

    @property
    def default_priority(self) -> float:
        """The raw priority given to new items: the largest seen so far, or with
        ``max_priority_within_buffer=True`` the largest among the stored items (1 when none)."""
        return self._max_value

    def _positions(self, index: Any, storage: Storage | None) -> torch.Tensor:
        index = torch.as_tensor(index, dtype=torch.long)
        if index.dim() >= 1 and storage is not None and storage.ndim == 2 and index.shape[-1] == 2:
            index = storage.flat_position(index)
        return index.reshape(-1)

    def extend(self, index: torch.Tensor, storage: Storage | None = None) -> None:
        positions = self._positions(index, storage)
        positions = positions[positions >= 0]
        if positions.numel() and int(positions.max()) >= self.max_capacity:
            raise IndexError(
                f"PrioritizedSampler: position {int(positions.max())} was written but the sampler "
                f"holds {self.max_capacity} priorities: build it with the storage's max_size."
            )
        if not positions.numel():
            return
        if self._raw is not None:  # the overwritten items no longer count towards the max
            self._raw[positions] = -math.inf
            if bool((positions == self._max_position).any()):
                self._recompute_max()
        self._write(
            positions, torch.full((positions.numel(),), self._max_value, dtype=torch.float64)
        )

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict[str, Any]]:
        n = check_not_empty(storage)
        end = n if storage.ndim == 1 else self.max_capacity
        p_sum = self._sum_tree.query(0, end)
        p_min = self._min_tree.query(0, end)
        if not bool(p_sum > 0):
            raise RuntimeError(
                "all priorities are zero: update them with positive values (or use eps > 0)."
            )
        mass = torch.rand(batch_size, dtype=self.dtype, device=self.device, generator=self._rng)
        mass = mass * p_sum
        position = self._sum_tree.scan_lower_bound(mass).clamp_max_(end - 1)
        p = self._sum_tree[position]
        weight = torch.pow(p / p_min, -self.beta)
        if storage.ndim == 1:
            index = position
        else:
            steps = self.max_capacity // storage.shape[0]
            index = torch.stack([position // steps, position % steps], -1)
        return index, {"priority_weight": weight}

    def update_priority(self, index: Any, priority: Any, storage: Storage | None = None) -> None:
        """Sets the raw priorities of ``index`` (any position within capacity; ``-1`` is skipped).

        Raises:
            ValueError: a priority is negative or NaN/inf, or sizes differ.
            IndexError: an index is outside ``[0, max_capacity)``.
        """
        priority = torch.as_tensor(priority, dtype=torch.float64).detach().cpu()
        positions = self._positions(_per_env(index, priority, storage), storage)
        if priority.numel() == 1:
            priority = priority.reshape(1).expand(positions.numel())
        elif priority.numel() != positions.numel():
            raise ValueError(
                f"update_priority: {positions.numel()} indices but {priority.numel()} priorities; "
                "pass one priority per index (or a single number)."
            )
        priority = priority.reshape(-1)
        check_priority(priority)
        valid = positions >= 0
        positions, priority = positions[valid], priority[valid]
        if positions.numel() and int(positions.max()) >= self.max_capacity:
            raise IndexError(
                f"update_priority: index {int(positions.max())} is outside the sampler's capacity "
                f"[0, {self.max_capacity})."
            )
        self._write(positions, priority)

    def _write(self, positions: torch.Tensor, raw: torch.Tensor) -> None:
        if not positions.numel():
            return
        if self._raw is None:
            self._max_value = max(self._max_value, float(raw.max()))
        else:
            self._raw[positions] = raw
            if bool((positions == self._max_position).any()) or self._max_position < 0:
                self._recompute_max()
            elif float(raw.max()) > self._max_value:
                self._max_value = float(raw.max())
                self._max_position = int(positions[int(raw.argmax())])
        value = torch.pow(raw + self.eps, self._alpha).to(device=self.device, dtype=self.dtype)
        # positions were range-checked by the callers (update_priority, or written by a writer)
        positions = positions.to(device=self.device, dtype=torch.long)
        self._sum_tree.update_checked(positions, value)
        self._min_tree.update_checked(positions, value)

    def _recompute_max(self) -> None:
        value, position = self._raw.max(0)
        stored = bool(value > -math.inf)
        self._max_value = float(value) if stored else 1.0
        self._max_position = int(position) if stored else -1

    def reduce(self, priority: torch.Tensor) -> torch.Tensor:
        """Reduces ``[batch, ...]`` priorities to ``[batch]`` with ``self.reduction``."""
        if priority.dim() <= 1:
            return priority
        flat = priority.reshape(priority.shape[0], -1)
        if self.reduction in ("max", "min", "median"):
            return getattr(flat, self.reduction)(-1).values
        return getattr(flat, self.reduction)(-1)

    def priorities(self) -> torch.Tensor:
        """The stored ``(p + eps) ** alpha`` values of every leaf."""
        return self._sum_tree.values()

    def empty(self) -> None:
        self._sum_tree.clear()
        self._min_tree.clear()
        self._max_value = 1.0
        if self._raw is not None:
            self._raw.fill_(-math.inf)
        self._max_position = -1

    def state_dict(self) -> dict:
        state = {"sum": self._sum_tree.state_dict(), "min": self._min_tree.state_dict(),
                 "max_priority": self._max_value, "alpha": self.alpha, "beta": self.beta}  # fmt: skip
        if self._raw is not None:
            state.update(raw=self._raw.clone(), max_position=self._max_position)
        return state

    def load_state_dict(self, state: dict) -> None:
        self._sum_tree.load_state_dict(state["sum"])
        self._min_tree.load_state_dict(state["min"])
        self._max_value = state["max_priority"]
        self._alpha, self.beta = state["alpha"], state["beta"]
        if self._raw is not None and "raw" in state:
            self._raw.copy_(state["raw"])
            self._max_position = state["max_position"]


def _per_env(index: Any, priority: torch.Tensor, storage: Storage | None) -> Any:
    """The ``(env, t)`` pairs of a 2-d storage's write, from the time positions ``extend`` returns.

    ``rb.update_priority(rb.extend(data), data["priority"])`` with ``[envs, T]`` data: the
    index holds the ``T`` time positions written in every env, the priority one value per step.
    """
    if storage is None or storage.ndim != 2 or priority.dim() != 2:
        return index
    index = torch.as_tensor(index)
    if index.dim() != 1 or priority.shape[1] != index.numel():
        return index
    envs = torch.arange(priority.shape[0]).unsqueeze(1).expand(-1, index.numel())
    return torch.stack([envs, index.unsqueeze(0).expand_as(envs)], -1)
