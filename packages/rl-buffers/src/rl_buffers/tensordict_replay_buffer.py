"""Replay buffers of TensorDicts, uniform and prioritized."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_buffers._layout import NestedKey, as_tuple, expand_to_batch
from rl_buffers.replay_buffer import ReplayBuffer
from rl_buffers.sample_units import Transition
from rl_buffers.samplers.prioritized import PrioritizedSampler
from rl_buffers.segment_tree import Backend
from rl_buffers.storages.base import Storage
from rl_buffers.storages.list_storage import ListStorage
from rl_buffers.storages.tensor_storage import TensorStorage
from rl_buffers.writers import TensorDictRoundRobinWriter


class TensorDictReplayBuffer(ReplayBuffer):
    """A :class:`ReplayBuffer` of TensorDicts that writes ``"index"`` into written and sampled data.

    Args:
        priority_key: the entry :meth:`update_tensordict_priority` reads. Default: ``"td_error"``.
        priority_weight_key: where sampled importance weights go. Default:
            ``"priority_weight"`` (TorchRL 0.14's name).
        **kwargs: as in :class:`ReplayBuffer`.

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import LazyTensorStorage
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
        >>> _ = rb.extend(TensorDict(obs=torch.randn(4, 3), batch_size=[4]))
        >>> sorted(rb.sample().keys())
        ['index', 'obs']
    """

    def __init__(
        self,
        *,
        priority_key: NestedKey = "td_error",
        priority_weight_key: NestedKey = "priority_weight",
        **kwargs: Any,
    ) -> None:
        self.priority_key = as_tuple(priority_key)
        self.priority_weight_key = as_tuple(priority_weight_key)
        super().__init__(**kwargs)

    def _default_writer(self) -> Any:
        return TensorDictRoundRobinWriter()

    def _ignored_keys(self) -> tuple:
        return (("index",), ("index_generation",), self.priority_weight_key)

    def _read(self, index: torch.Tensor, info: dict[str, Any]) -> tuple[Any, bool]:
        storage = self._storage
        layout = getattr(storage, "layout", None)
        # Fast path: a tensor storage builds the sampled TensorDict with "index" (and a
        # root-level weight) already in it, which saves a validated set() per entry.
        if (
            self._collate_fn is None
            and isinstance(storage, TensorStorage)
            and layout is not None
            and layout.kind == "tensordict"
            and not layout.item_batch
            and (len(self.priority_weight_key) == 1 or "priority_weight" not in info)
        ):
            extra = {"index": index}
            weight = info.get("priority_weight")
            if weight is not None:
                extra[self.priority_weight_key[0]] = weight.cpu()
            return storage.get(index, extra), True
        return storage.get(index), False

    def _post_sample(self, data: Any, info: dict[str, Any], written: bool = False) -> Any:
        if isinstance(data, TensorDictBase):
            if not written:
                index = info["index"]
                if isinstance(self._storage, ListStorage):
                    data = data.exclude("index", self.priority_weight_key)
                index = index.to(data.device) if data.device is not None else index
                data.set("index", expand_to_batch(index, data))
                if "priority_weight" in info:
                    weight = info["priority_weight"].to(data.device or "cpu")
                    data.set(self.priority_weight_key, expand_to_batch(weight, data))
            data = self._sampler.annotate(data, info)
        return data

    def sample(
        self,
        batch_size: int | None = None,
        return_info: bool = False,
        include_info: bool | None = None,
    ) -> Any:
        """A batch with ``"index"`` (and the priority weight) written into it.

        Args:
            batch_size: items to sample (default: the constructor's).
            return_info: also return the info dict, as :meth:`ReplayBuffer.sample`.
            include_info: deprecated (TorchRL's old flag): ``False`` leaves ``"index"`` and
                the weight out of the sampled data; ``True`` is the default behaviour.

        Examples:
            >>> from tensordict import TensorDict
            >>> from rl_buffers import LazyTensorStorage
            >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4), batch_size=2)
            >>> _ = rb.extend(TensorDict(obs=torch.zeros(4, 1), batch_size=[4]))
            >>> data, info = rb.sample(return_info=True)
            >>> bool((data["index"] == info["index"]).all())
            True
        """
        if include_info is not None:
            warnings.warn(
                "TensorDictReplayBuffer.sample(include_info=...) is deprecated: the sampled "
                "data always holds 'index' (and the weight); use return_info=True for the dict.",
                DeprecationWarning,
                stacklevel=2,
            )
        data, info = super().sample(batch_size, return_info=True)
        if include_info is False and isinstance(data, TensorDictBase):
            data = data.exclude("index", self.priority_weight_key)
        return (data, info) if return_info else data

    def extend(self, data: Any, *, update_priority: bool | None = None) -> torch.Tensor:
        """Writes a batch; its ``priority_key`` entry, when present, sets the items' priorities
        (``update_priority=False``: new items get the default priority instead)."""
        index = super().extend(data)
        if index.numel() == 0:  # held back by a write transform
            return index
        if update_priority is not False and isinstance(data, TensorDictBase) \
                and data.get(self.priority_key, None) is not None \
                and isinstance(self._sampler_priority(), PrioritizedSampler):  # fmt: skip
            self.update_priority(data.get("index"), self._reduce(data.get(self.priority_key)))
        return index

    def _sampler_priority(self) -> Any:
        return getattr(self._sampler, "priority", self._sampler)

    def _reduce(self, priority: torch.Tensor) -> torch.Tensor:
        sampler = self._sampler_priority()
        batch = 1 if self._storage.ndim == 1 else 2
        flat = priority.reshape(*priority.shape[:batch], -1) if priority.dim() > batch else priority
        if flat.dim() > batch:
            flat = sampler.reduce(flat.reshape(-1, flat.shape[-1])).reshape(flat.shape[:batch])
        return flat

    def update_tensordict_priority(self, data: TensorDictBase) -> None:
        """Updates priorities from ``data[priority_key]`` at ``data["index"]`` (a sampled batch)."""
        if "index" not in data:
            raise KeyError(
                "update_tensordict_priority: the data has no 'index' entry; pass a sampled batch."
            )
        priority = data.get(self.priority_key, None)
        if priority is None:
            raise KeyError(
                f"update_tensordict_priority: the data has no {self.priority_key!r} entry; write the "
                "per-sample priority (e.g. the loss's td_error) there first."
            )
        index = data.get("index")
        priority = priority.detach()
        if priority.dim() > 1 and priority.shape[0] == index.shape[0]:
            priority = self._sampler_priority().reduce(priority)
        by_anchor = self._anchor_reduced_priority(data, priority)
        if by_anchor is not None:
            index, priority = by_anchor
        elif self._storage.ndim == 1:
            # an item stored with its own batch dims (e.g. a [T] trajectory in a ListStorage)
            # carries its index on every step; one index per item is enough
            while index.dim() > max(priority.dim(), 1):
                index = index[..., 0]
        self.update_priority(index, priority)

    def _anchor_reduced_priority(
        self, data: TensorDictBase, priority: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """For windows of a sample unit: each anchor's max priority over its valid records.

        ``None`` unless the buffer has a window unit and ``data`` holds ``"anchor_index"``.
        """
        anchor = data.get("anchor_index", None)
        if anchor is None or self._sample_unit is None or isinstance(self._sample_unit, Transition):
            return None
        valid = data.get("validity_mask", None)
        valid = (
            torch.ones(anchor.shape[0], dtype=torch.bool) if valid is None else valid.reshape(-1)
        )
        anchors, slot = torch.unique(anchor, dim=0, return_inverse=True)
        priority = priority.reshape(-1).to(torch.float64)
        best = torch.full((anchors.shape[0],), -torch.inf, dtype=priority.dtype)
        best = best.scatter_reduce(
            0, slot.cpu(), priority.cpu().where(valid.cpu(), -torch.inf), "amax"
        )
        kept = torch.isfinite(best)
        return anchors[kept.to(anchors.device)], best[kept].to(torch.float32)


class PrioritizedReplayBuffer(ReplayBuffer):
    """A :class:`ReplayBuffer` with a :class:`PrioritizedSampler` (Schaul et al., 2016).

    Args:
        alpha: prioritization exponent.
        beta: importance-sampling exponent.
        eps: added to priorities.
        dtype: of the priority trees.
        storage: default ``ListStorage(1000)``.
        backend: segment-tree kernels (``"auto"``, ``"torch"``, ``"cpp"``, ``"cuda"``).
        **kwargs: as in :class:`ReplayBuffer`.

    Examples:
        >>> rb = PrioritizedReplayBuffer(alpha=0.7, beta=1.1, collate_fn=lambda x: x, backend="torch")
        >>> rb.add(1)
        0
        >>> rb.sample(1)
        [1]
        >>> rb.update_priority(1, 0.5)
    """

    def __init__(
        self, *, alpha: float, beta: float, eps: float = 1e-8, dtype: torch.dtype = torch.float32,
        storage: Storage | None = None, backend: Backend = "auto", **kwargs: Any,
    ) -> None:  # fmt: skip
        storage = storage if storage is not None else ListStorage(1000)
        sampler = PrioritizedSampler(storage.max_size, alpha, beta, eps, dtype, backend=backend)
        super().__init__(storage=storage, sampler=sampler, **kwargs)


class TensorDictPrioritizedReplayBuffer(TensorDictReplayBuffer):
    """A :class:`TensorDictReplayBuffer` with a :class:`PrioritizedSampler`.

    Extending with data that holds ``priority_key`` uses it as the initial
    priority; samples carry ``"index"`` and the weight under ``priority_weight_key``.

    Args:
        alpha, beta, eps, dtype, backend: as in :class:`PrioritizedReplayBuffer`.
        priority_key: default ``"td_error"``.
        reduction: reduces priorities with extra dims (``"max"``, ``"min"``, ``"sum"``, ``"mean"``).
        priority_weight_key: default ``"priority_weight"``.
        **kwargs: as in :class:`ReplayBuffer`.

    Examples:
        >>> from tensordict import TensorDict
        >>> rb = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=1.1, backend="torch")
        >>> _ = rb.extend(TensorDict({"a": torch.randn(2, 3)}, batch_size=[2]))
        >>> sample = rb.sample(2)
        >>> sorted(sample.keys())
        ['a', 'index', 'priority_weight']
        >>> sample["td_error"] = torch.rand(2)
        >>> rb.update_tensordict_priority(sample)
    """

    def __init__(
        self, *, alpha: float, beta: float, priority_key: NestedKey = "td_error", eps: float = 1e-8,
        dtype: torch.dtype = torch.float32, storage: Storage | None = None, reduction: str = "max",
        backend: Backend = "auto", **kwargs: Any,
    ) -> None:  # fmt: skip
        storage = storage if storage is not None else ListStorage(1000)
        sampler = PrioritizedSampler(
            storage.max_size, alpha, beta, eps, dtype, reduction, backend=backend
        )
        super().__init__(priority_key=priority_key, storage=storage, sampler=sampler, **kwargs)
