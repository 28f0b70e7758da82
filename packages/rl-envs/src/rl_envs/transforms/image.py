"""Pixel transforms: ``ToTensorImage``, ``Resize``, ``GrayScale``, ``CenterCrop``.

All work on any number of leading (batch) dims and keep TorchRL's conventions:
``Resize(w, h)`` and ``CenterCrop(w, h)`` produce images of shape ``[..., C, w, h]``
(TorchRL passes ``[w, h]`` as the output size, so ``w`` is the number of rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import Transform

_GRAY_WEIGHTS = (0.2989, 0.587, 0.114)  # ITU-R 601-2 luma, as torchvision's rgb_to_grayscale


def _bounded(spec: Any, shape: Sequence[int], low: float, high: float, dtype: torch.dtype) -> Any:
    from rl_envs.specs import Bounded

    return Bounded(low=low, high=high, shape=torch.Size(shape), device=spec.device, dtype=dtype)


def _like(spec: Any, shape: Sequence[int]) -> Any:
    """``spec`` with a new shape, keeping scalar bounds of Bounded specs."""
    from rl_envs.specs import Bounded

    if isinstance(spec, Bounded):
        low, high = spec.space.low.min().item(), spec.space.high.max().item()
        return _bounded(spec, shape, low, high, spec.dtype)
    from rl_envs.transforms._utils import unbounded_like

    return unbounded_like(spec, shape)


class ToTensorImage(Transform):
    """``[..., H, W, C]`` images (uint8 in [0, 255]) to ``[..., C, H, W]`` floats in [0, 1].

    Args:
        from_int: divide by 255 (default: when the input is not floating point).
        unsqueeze: add a leading dim to unbatched ``[H, W, C]`` images.
        dtype: output dtype (default: the default float dtype).
        in_keys: images (default ``["pixels"]``).
        out_keys: destinations (default ``in_keys``).
        shape_tolerant: leave images already channel-first (C in {1, 3} at -3) untouched.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> img = torch.full((4, 5, 3), 255, dtype=torch.uint8)
        >>> out = ToTensorImage()(TensorDict(pixels=img))["pixels"]
        >>> out.shape, out.max().item()
        (torch.Size([3, 4, 5]), 1.0)
    """

    def __init__(
        self,
        from_int: bool | None = None,
        unsqueeze: bool = False,
        dtype: torch.dtype | None = None,
        *,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        shape_tolerant: bool = False,
    ) -> None:
        super().__init__(in_keys if in_keys is not None else ["pixels"], out_keys)
        self.from_int = from_int
        self.unsqueeze = unsqueeze
        self.dtype = dtype if dtype is not None else torch.get_default_dtype()
        self.shape_tolerant = shape_tolerant

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        if (
            self.shape_tolerant
            and x.ndim >= 3
            and x.shape[-1] not in (1, 3)
            and x.shape[-3] in (1, 3)
        ):
            return x.to(self.dtype)
        from_int = self.from_int if self.from_int is not None else not x.is_floating_point()
        x = x.movedim(-1, -3).to(self.dtype)
        if from_int:
            x = x.div(255)
        if self.unsqueeze and x.ndim == 3:
            x = x.unsqueeze(0)
        return x

    def transform_leaf_spec(self, spec: Any) -> Any:
        shape = list(spec.shape)
        shape = [*shape[:-3], shape[-1], shape[-3], shape[-2]]
        from_int = self.from_int if self.from_int is not None else not spec.dtype.is_floating_point
        if from_int or spec.dtype == torch.uint8:
            return _bounded(spec, shape, 0.0, 1.0, self.dtype)
        return _like(spec, shape)


class Resize(Transform):
    """Resizes ``[..., C, H, W]`` images to ``[..., C, w, h]`` by interpolation.

    Args:
        w: output rows.
        h: output columns (default ``w``).
        interpolation: a mode of ``torch.nn.functional.interpolate`` ("bilinear", "nearest", ...).
        in_keys: images (default ``["pixels"]``).
        out_keys: destinations (default ``in_keys``).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> Resize(2, 3)(TensorDict(pixels=torch.rand(2, 3, 8, 8)))["pixels"].shape
        torch.Size([2, 3, 2, 3])
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        interpolation: str = "bilinear",
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys if in_keys is not None else ["pixels"], out_keys)
        self.w = int(w)
        self.h = int(h) if h is not None else int(w)
        self.interpolation = interpolation

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim < 3:
            raise ValueError(f"Resize expects [..., C, H, W] images, got shape {tuple(x.shape)}.")
        lead = x.shape[:-3]
        flat = x.reshape(-1, *x.shape[-3:])
        dtype = flat.dtype
        if not flat.is_floating_point():
            flat = flat.float()
        kwargs: dict[str, Any] = {}
        if self.interpolation in ("bilinear", "bicubic", "linear", "trilinear"):
            kwargs["align_corners"] = False
            kwargs["antialias"] = True
        out = F.interpolate(flat, size=(self.w, self.h), mode=self.interpolation, **kwargs)
        if not dtype.is_floating_point:
            out = out.round().clamp(torch.iinfo(dtype).min, torch.iinfo(dtype).max).to(dtype)
        return out.reshape(*lead, *out.shape[-3:])

    def transform_leaf_spec(self, spec: Any) -> Any:
        return _like(spec, [*spec.shape[:-2], self.w, self.h])

    def extra_repr(self) -> str:
        return (
            f"w={self.w}, h={self.h}, interpolation={self.interpolation!r}, {super().extra_repr()}"
        )


class GrayScale(Transform):
    """``[..., 3, H, W]`` RGB images to ``[..., 1, H, W]`` luma.

    Args:
        in_keys: images (default ``["pixels"]``).
        out_keys: destinations (default ``in_keys``).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> GrayScale()(TensorDict(pixels=torch.ones(3, 2, 2)))["pixels"].shape
        torch.Size([1, 2, 2])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys if in_keys is not None else ["pixels"], out_keys)

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim < 3 or x.shape[-3] != 3:
            raise ValueError(
                f"GrayScale expects [..., 3, H, W] images, got shape {tuple(x.shape)}; "
                "put ToTensorImage before it for [H, W, C] images."
            )
        r, g, b = x.unbind(-3)
        gray = _GRAY_WEIGHTS[0] * r + _GRAY_WEIGHTS[1] * g + _GRAY_WEIGHTS[2] * b
        return gray.unsqueeze(-3).to(x.dtype)

    def transform_leaf_spec(self, spec: Any) -> Any:
        return _like(spec, [*spec.shape[:-3], 1, *spec.shape[-2:]])


class CenterCrop(Transform):
    """Crops the centre ``w x h`` window of ``[..., C, H, W]`` images.

    Args:
        w: output rows.
        h: output columns (default ``w``).
        in_keys: images (default ``["pixels"]``).
        out_keys: destinations (default ``in_keys``).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> img = torch.arange(16.0).reshape(1, 4, 4)
        >>> CenterCrop(2)(TensorDict(pixels=img))["pixels"]
        tensor([[[ 5.,  6.],
                 [ 9., 10.]]])
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys if in_keys is not None else ["pixels"], out_keys)
        self.w = int(w)
        self.h = int(h) if h is not None else int(w)

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        rows, cols = x.shape[-2], x.shape[-1]
        if self.w > rows or self.h > cols:
            raise ValueError(
                f"CenterCrop({self.w}, {self.h}) is larger than the image ({rows}x{cols})."
            )
        top = round((rows - self.w) / 2.0)
        left = round((cols - self.h) / 2.0)
        return x[..., top : top + self.w, left : left + self.h]

    def transform_leaf_spec(self, spec: Any) -> Any:
        return _like(spec, [*spec.shape[:-2], self.w, self.h])

    def extra_repr(self) -> str:
        return f"w={self.w}, h={self.h}, {super().extra_repr()}"
