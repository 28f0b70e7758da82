"""The transforms of a replay buffer: applied in order on reads, inverted in reverse on writes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tensordict import is_tensor_collection


@dataclass(frozen=True)
class _Entry:
    transform: Callable[[Any], Any]
    invert: bool  # True: ``transform`` runs on writes and its ``inv`` (if any) on reads


def _inverse(transform: Any) -> Callable[[Any], Any] | None:
    inv = getattr(transform, "inv", None)
    return inv if callable(inv) else None


class BufferTransforms:
    """An ordered list of transforms, as TorchRL's ``Compose`` inside a replay buffer.

    Any callable works. On :meth:`read` (sampling, indexing) each transform is called
    in order; on :meth:`write` (``extend`` / ``add``) the inverse of each (its ``inv``
    method, e.g. an env transform's; nothing for a plain function) is called in reverse
    order. A transform added with ``invert=True`` swaps the two: it runs on writes and
    its ``inv`` on reads. Env-transform inverses only see TensorDicts.
    """

    def __init__(self) -> None:
        self._entries: list[_Entry] = []

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, index: int) -> Callable[[Any], Any]:
        return self._entries[index].transform

    def insert(self, index: int, transform: Callable[[Any], Any], invert: bool = False) -> None:
        if not callable(transform):
            raise TypeError(
                f"a replay-buffer transform must be callable (data -> data); got {type(transform).__name__}."
            )
        self._entries.insert(index, _Entry(transform, invert))

    def append(self, transform: Callable[[Any], Any], invert: bool = False) -> None:
        self.insert(len(self._entries), transform, invert)

    def __call__(self, data: Any) -> Any:
        return self.forward(data)

    def forward(self, data: Any) -> Any:
        """What reads apply (TorchRL's ``Compose.forward``)."""
        return self.read(data)

    def inv(self, data: Any) -> Any:
        """What writes apply (TorchRL's ``Compose.inv``)."""
        return self.write(data)

    def read_steps(self) -> list[tuple[Callable[[Any], Any], list | None, list | None]]:
        """What :meth:`read` calls, in order: ``(fn, in_keys, out_keys)``.

        ``in_keys`` / ``out_keys`` are the transform's own (env transforms have them);
        ``None`` when unknown (plain callables, inverses), meaning "may touch anything".
        """
        steps: list[tuple[Callable[[Any], Any], list | None, list | None]] = []
        for entry in self._entries:
            if not entry.invert:
                transform = entry.transform
                out_keys = getattr(transform, "out_keys", None) or None
                steps.append((transform, getattr(transform, "in_keys", None), out_keys))
            elif (inv := _inverse(entry.transform)) is not None:
                steps.append((inv, None, None))
        return steps

    def read(self, data: Any) -> Any:
        for entry in self._entries:
            if not entry.invert:
                data = entry.transform(data)
            elif (inv := _inverse(entry.transform)) is not None and is_tensor_collection(data):
                data = inv(data)
        return data

    def write(self, data: Any) -> Any:
        """Applies the write transforms; ``None`` (a transform holding the data back, such as
        a GRPO group still incomplete) stops the chain: nothing is to be written."""
        for entry in reversed(self._entries):
            if entry.invert:
                data = entry.transform(data)
            elif (inv := _inverse(entry.transform)) is not None and is_tensor_collection(data):
                data = inv(data)
            if data is None:
                return None
        return data
