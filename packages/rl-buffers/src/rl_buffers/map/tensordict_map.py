"""``TensorDictMap``: a dictionary from TensorDict rows (by some entries) to stored TensorDicts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from rl_buffers.map.query import QueryModule
from rl_buffers.storages.base import Storage
from rl_buffers.storages.tensor_storage import LazyTensorStorage


class TensorDictMap:
    """Maps the rows of a TensorDict (identified by ``query_module``'s ``in_keys``) to values.

    ``tdmap[keys] = values`` stores row ``i`` of ``values`` under the id of row ``i``
    of ``keys``; ``tdmap[keys]`` reads them back (rows never written raise);
    :meth:`contains` says which rows are known. Values live in ``storage`` at their
    id, so the map holds at most ``storage.max_size`` rows.

    Args:
        query_module: turns rows into ids (:class:`QueryModule`).
        storage: where values go (a tensor storage, or a list storage for ragged ones).
        collate_fn: stacks what a list storage returns. Default: ``torch.stack``.

    Examples:
        >>> from tensordict import TensorDict
        >>> tdmap = TensorDictMap.from_tensordict_pair(
        ...     TensorDict(obs=torch.zeros(1, 2), batch_size=[1]), TensorDict(v=torch.zeros(1), batch_size=[1]),
        ...     in_keys=["obs"])
        >>> keys = TensorDict(obs=torch.tensor([[0.0, 1.0], [2.0, 3.0]]), batch_size=[2])
        >>> tdmap[keys] = TensorDict(v=torch.tensor([10.0, 20.0]), batch_size=[2])
        >>> other = TensorDict(obs=torch.tensor([[0.0, 1.0], [5.0, 5.0]]), batch_size=[2])
        >>> tdmap[keys[1:]]["v"].tolist(), tdmap.contains(other).tolist()
        ([20.0], [True, False])
    """

    def __init__(
        self,
        *,
        query_module: QueryModule,
        storage: Storage,
        collate_fn: Callable[[Any], Any] | None = None,
    ) -> None:
        self.query_module = query_module
        self.storage = storage
        self.collate_fn = collate_fn if collate_fn is not None else torch.stack

    @classmethod
    def from_tensordict_pair(
        cls,
        source: TensorDictBase,
        dest: TensorDictBase,
        in_keys: Sequence[NestedKey],
        *,
        max_size: int = 1000,
        storage_constructor: Callable[[int], Storage] | None = None,
        hash_module: torch.nn.Module | None = None,
        collate_fn: Callable[[Any], Any] | None = None,
        **_: Any,
    ) -> TensorDictMap:
        """A map keyed by ``source``'s ``in_keys`` for values shaped like ``dest``."""
        query = QueryModule(in_keys=in_keys, index_key="_index", hash_module=hash_module)
        storage = (storage_constructor or LazyTensorStorage)(max_size)
        return cls(query_module=query, storage=storage, collate_fn=collate_fn)

    @property
    def max_size(self) -> int:
        return self.storage.max_size

    def _ids(self, item: TensorDictBase, extend: bool) -> torch.Tensor:
        query = self.query_module
        ids = query(item, extend=extend, write_hash=False, clone=True).get(query.index_key)
        return ids.reshape(-1)

    def __setitem__(self, item: TensorDictBase, value: TensorDictBase) -> None:
        ids = self._ids(item, extend=True)
        if int(ids.max()) >= self.max_size:
            raise RuntimeError(
                f"TensorDictMap is full: {int(ids.max()) + 1} distinct keys for a storage of "
                f"{self.max_size}; build it with a larger storage."
            )
        self.storage.set(ids, value)

    def __getitem__(self, item: TensorDictBase) -> TensorDictBase:
        ids = self._ids(item, extend=False)
        if bool((ids < 0).any()):
            raise KeyError(
                f"TensorDictMap: {int((ids < 0).sum())} of the {ids.numel()} rows were never "
                "written; check with contains() first."
            )
        out = self.storage.get(ids)
        return self.collate_fn(out) if isinstance(out, list) else out

    def contains(self, item: TensorDictBase) -> torch.Tensor:
        """Whether each row of ``item`` has a value."""
        ids = self._ids(item, extend=False)
        return (ids >= 0) & (ids < len(self.storage))

    def __contains__(self, item: TensorDictBase) -> bool:
        return bool(self.contains(item).all())

    def __len__(self) -> int:
        return len(self.storage)
