"""A list storage that keeps each tensor compressed (zlib by default), TorchRL's API."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict, is_tensor_collection

from rl_buffers.storages.list_storage import ListStorage

_Record = tuple[str, Any, Any]  # (kind, payload, metadata)


class CompressedListStorage(ListStorage):
    """Keeps items like :class:`ListStorage`, each tensor compressed (e.g. image frames).

    Tensors and the tensor leaves of TensorDicts are compressed on write and restored
    (shape, dtype, device, TensorDict batch size) on read; other objects are kept as is.

    Args:
        max_size: the capacity in items.
        compression_fn: ``tensor -> uint8 tensor`` of compressed bytes. Default: zlib
            at ``compression_level``.
        decompression_fn: ``(compressed, metadata) -> tensor``, ``metadata`` holding
            ``"shape"``, ``"dtype"`` and ``"device"``. Default: zlib.
        compression_level: the default compressor's level (zlib: 0-9). Default: 3.
        device: where read tensors go (and TorchRL's argument). Default: ``"cpu"``.
        compilable: TorchRL's flag, kept (see :attr:`Storage.compilable`).

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import ReplayBuffer
        >>> rb = ReplayBuffer(storage=CompressedListStorage(100), batch_size=3)
        >>> _ = rb.extend(TensorDict(obs=torch.zeros(10, 3, 84, 84, dtype=torch.uint8), batch_size=[10]))
        >>> rb.sample()["obs"].shape
        torch.Size([3, 3, 84, 84])
    """

    def __init__(
        self,
        max_size: int,
        *,
        compression_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
        decompression_fn: Callable[[torch.Tensor, dict], torch.Tensor] | None = None,
        compression_level: int = 3,
        device: torch.device | str = "cpu",
        compilable: bool = False,
    ) -> None:
        super().__init__(max_size, device=device, compilable=compilable)
        self.compression_level = compression_level
        self.device = torch.device(device)
        self.compression_fn = compression_fn or self._default_compression_fn
        self.decompression_fn = decompression_fn or self._default_decompression_fn

    def _default_compression_fn(self, tensor: torch.Tensor) -> torch.Tensor:
        raw = tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()
        return torch.frombuffer(
            bytearray(zlib.compress(raw, self.compression_level)), dtype=torch.uint8
        )

    @staticmethod
    def _default_decompression_fn(compressed: torch.Tensor, metadata: dict) -> torch.Tensor:
        raw = zlib.decompress(compressed.cpu().numpy().tobytes())
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(metadata["dtype"])
        return flat.reshape(metadata["shape"])

    def _pack_tensor(self, tensor: torch.Tensor) -> tuple[torch.Tensor, dict]:
        meta = {"shape": tensor.shape, "dtype": tensor.dtype, "device": tensor.device}
        return self.compression_fn(tensor), meta

    def _unpack_tensor(self, payload: torch.Tensor, meta: dict) -> torch.Tensor:
        return self.decompression_fn(payload, meta).to(self.device)

    def _compress(self, item: Any) -> _Record:
        if isinstance(item, torch.Tensor):
            return ("tensor", *self._pack_tensor(item))
        if is_tensor_collection(item):
            leaves = {}
            for key, value in item.items(include_nested=True, leaves_only=True):
                packed = isinstance(value, torch.Tensor)
                leaves[key] = (packed, *(self._pack_tensor(value) if packed else (value, None)))
            return ("tensordict", leaves, item.batch_size)
        return ("other", item, None)

    def _decompress(self, record: _Record) -> Any:
        kind, payload, meta = record
        if kind == "tensor":
            return self._unpack_tensor(payload, meta)
        if kind == "tensordict":
            out = TensorDict(batch_size=meta, device=None)
            for key, (packed, value, leaf_meta) in payload.items():
                out.set(key, self._unpack_tensor(value, leaf_meta) if packed else value)
            return out
        return payload

    def set(self, index: slice | torch.Tensor, data: Any) -> None:
        super().set(index, [self._compress(item) for item in self._as_items(data)])

    def get(self, index: torch.Tensor) -> list[Any]:
        return [self._decompress(record) for record in super().get(index)]

    def nbytes(self) -> int:
        """Bytes of the compressed tensors held (what the storage saves memory on)."""
        total = 0
        for kind, payload, _ in self._items:
            if kind == "tensor":
                total += payload.numel()
            elif kind == "tensordict":
                total += sum(v.numel() for packed, v, _ in payload.values() if packed)
        return total
