"""``PinMemoryTransform``: page-locks env outputs for fast host-to-GPU copies."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from rl_envs.transforms.transform import Transform


class PinMemoryTransform(Transform):
    """Returns every reset / step output (and ``forward`` input) in pinned CPU memory.

    Pinned tensors copy to a CUDA device asynchronously (``.to("cuda", non_blocking=True)``).
    Pinning needs a CUDA runtime; without one the call raises.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = PinMemoryTransform()
        >>> out = t(TensorDict(a=torch.zeros(2))) if torch.cuda.is_available() else None
    """

    def __init__(self) -> None:
        super().__init__()

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if not torch.cuda.is_available():
            raise RuntimeError(
                "PinMemoryTransform: pinning memory needs a CUDA device and none is available; "
                "drop the transform on CPU-only machines."
            )
        return next_tensordict.pin_memory()

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call(tensordict_reset)
