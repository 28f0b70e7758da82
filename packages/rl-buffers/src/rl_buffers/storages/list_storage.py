"""A storage of arbitrary Python objects in a list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tensordict import is_tensor_collection

from rl_buffers.storages.base import Storage


class ListStorage(Storage):
    """Keeps each item as is, in a Python list (any object: tensors, dicts, strings).

    Args:
        max_size: the capacity. Default: ``1000`` (TorchRL's default storage size).
        device: unused, kept for TorchRL compatibility.
        compilable: TorchRL's flag, kept (see :attr:`Storage.compilable`).

    Examples:
        >>> storage = ListStorage(3)
        >>> storage.set(torch.tensor([0, 1]), ["a", "b"])
        >>> storage.get(torch.tensor([1, 1]))
        ['b', 'b']
    """

    def __init__(
        self,
        max_size: int | None = None,
        *,
        device: torch.device | str | None = None,
        compilable: bool = False,
    ) -> None:
        self._compilable = bool(compilable)
        self.max_size = 1000 if max_size is None else int(max_size)
        if self.max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size}.")
        self.ndim = 1
        self._items: list[Any] = []
        self._cursor = 0
        self._write_count = 0

    def __len__(self) -> int:
        return len(self._items)

    @staticmethod
    def _as_items(data: Any) -> list[Any]:
        if is_tensor_collection(data) or isinstance(data, torch.Tensor):
            return list(data.unbind(0))
        return list(data)

    def n_items(self, data: Any) -> int:
        if is_tensor_collection(data) or isinstance(data, torch.Tensor):
            return data.shape[0]
        return len(data)

    def take(self, data: Any, start: int) -> Any:
        return self._as_items(data)[start:]

    def set(self, index: slice | torch.Tensor, data: Any) -> None:
        if isinstance(index, int) or (isinstance(index, torch.Tensor) and index.ndim == 0):
            index, data = [int(index)], [data]  # one item (TorchRL's storage.set(i, item))
        items = self._as_items(data)
        if isinstance(index, slice):
            positions = range(self.max_size)[index]
        elif isinstance(index, torch.Tensor):
            positions = index.tolist()
        else:
            positions = list(index)
        if len(positions) != len(items):
            raise ValueError(f"{len(positions)} positions for {len(items)} items.")
        final = dict(zip(positions, items, strict=True))  # a position written twice: last wins
        stored = len(self._items)
        appended = sorted(pos for pos in final if pos >= stored)
        holes = [pos for want, pos in enumerate(appended, start=stored) if pos != want]
        bad = [pos for pos in final if pos < 0 or pos >= self.max_size] + holes
        if bad:
            raise IndexError(
                f"ListStorage: cannot write position {bad[0]} with {stored} items stored "
                f"(max_size {self.max_size}): positions past the end must continue it."
            )
        for pos in sorted(final):  # in order, so a wrapped batch ([2, 0, 1]) fills an empty list
            if pos == len(self._items):
                self._items.append(final[pos])
            else:
                self._items[pos] = final[pos]
        if positions:
            self._cursor = (positions[-1] + 1) % self.max_size
            self._write_count += 1

    def get(self, index: torch.Tensor) -> list[Any]:
        return [self._items[i] for i in torch.as_tensor(index).reshape(-1).tolist()]

    def empty(self) -> None:
        self._items = []
        self._cursor = 0
        self._write_count += 1

    def state_dict(self) -> dict:
        return {"items": list(self._items), "cursor": self._cursor, "max_size": self.max_size}

    def load_state_dict(self, state: dict) -> None:
        if state["max_size"] != self.max_size:
            raise ValueError(
                f"the checkpoint holds a ListStorage of max_size {state['max_size']}, this one has "
                f"{self.max_size}: build the buffer with the same max_size."
            )
        self._items = list(state["items"])
        self._cursor = state["cursor"]
        self._write_count += 1

    def dumps(self, path: Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), path / "list_storage.pt")

    def loads(self, path: Path) -> None:
        self.load_state_dict(torch.load(Path(path) / "list_storage.pt", weights_only=False))
