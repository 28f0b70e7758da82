"""``Crop``: a fixed window of images (top-left corner and size)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rl_envs.transforms._utils import NestedKey, reshaped_spec
from rl_envs.transforms.transform import Transform


class Crop(Transform):
    """Crops images (``[..., C, H, W]``) to a window starting at ``(top, left)``.

    As in TorchRL (which calls ``torchvision``'s ``crop(img, top, left, w, h)``),
    the window spans ``w`` rows and ``h`` columns; with ``h=None`` it is square.

    Args:
        w: number of rows kept.
        h: number of columns kept (defaults to ``w``).
        top: first row kept.
        left: first column kept.
        in_keys: images to crop (default ``["pixels"]``).
        out_keys: destinations (default ``in_keys``).

    Raises:
        ValueError: at the first image smaller than the window (which would need padding).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> img = torch.arange(16.0).reshape(1, 4, 4)
        >>> Crop(2, top=1, left=2, in_keys=["pixels"])(TensorDict(pixels=img))["pixels"]
        tensor([[[ 6.,  7.],
                 [10., 11.]]])
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        top: int = 0,
        left: int = 0,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys if in_keys is not None else ["pixels"], out_keys)
        self.w = int(w)
        self.h = int(h) if h else self.w
        self.top = int(top)
        self.left = int(left)

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        rows, cols = x.shape[-2], x.shape[-1]
        if self.top + self.w > rows or self.left + self.h > cols or self.top < 0 or self.left < 0:
            raise ValueError(
                f"Crop: the window of {self.w} rows x {self.h} columns at (top={self.top}, "
                f"left={self.left}) does not fit an image of {rows} x {cols} (shape "
                f"{tuple(x.shape)}); choose a smaller window or a Resize first."
            )
        return x[..., self.top : self.top + self.w, self.left : self.left + self.h]

    def transform_leaf_spec(self, spec: Any) -> Any:
        return reshaped_spec(spec, self._apply_transform)
