"""Convolutional feature extractors: :class:`ConvNet` (2-d) and :class:`Conv3dNet` (3-d)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
from torch import nn


class SquashDims(nn.Module):
    """Flatten the last ``ndims_in`` dims into one (e.g. ``[*B, C, H, W] -> [*B, C*H*W]``).

    Examples:
        >>> import torch
        >>> SquashDims()(torch.zeros(2, 3, 4, 5)).shape
        torch.Size([2, 60])
    """

    def __init__(self, ndims_in: int = 3) -> None:
        super().__init__()
        self.ndims_in = ndims_in

    def forward(self, value: torch.Tensor) -> torch.Tensor:
        return value.flatten(-self.ndims_in)


def _find_depth(who: str, depth: int | None, **per_layer: Any) -> int:
    """``depth``, or the length of the per-layer lists when it is ``None``."""
    if depth is None:
        for value in per_layer.values():
            if isinstance(value, (list, tuple)):
                depth = len(value)
    if depth is None:
        raise ValueError(
            f"{who}: depth=None requires one of the input args ({', '.join(per_layer)}) to be "
            "a list or tuple giving one value per layer; pass depth= or such a list."
        )
    return depth


def _per_layer(who: str, value: Any, depth: int, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != depth:
            raise ValueError(
                f"{who}: depth={depth} but {name} has {len(value)} entries: consider matching or "
                f"specifying a constant {name} argument together with the desired depth."
            )
        return list(value)
    return [value] * depth


class _ConvStack(nn.Module):
    """``depth`` convolutions (each followed by its activation and optional norm), then an aggregator."""

    _conv: ClassVar[type[nn.Module]]
    _lazy_conv: ClassVar[type[nn.Module]]
    _spatial_dims: ClassVar[int]

    def __init__(
        self,
        in_features: int | None = None,
        depth: int | None = None,
        num_cells: int | Sequence[int] | None = None,
        kernel_sizes: int | Sequence[int] = 3,
        strides: int | Sequence[int] = 1,
        paddings: int | Sequence[int] = 0,
        activation_class: type[nn.Module] | Callable = nn.ELU,
        activation_kwargs: dict | Sequence[dict] | None = None,
        norm_class: type[nn.Module] | Callable | None = None,
        norm_kwargs: dict | Sequence[dict] | None = None,
        bias_last_layer: bool = True,
        aggregator_class: type[nn.Module] | Callable | None = SquashDims,
        aggregator_kwargs: dict | None = None,
        squeeze_output: bool = False,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        who = type(self).__name__
        if num_cells is None:
            num_cells = [32] * (depth if depth is not None else 3)
        depth = _find_depth(
            who,
            depth,
            num_cells=num_cells,
            kernel_sizes=kernel_sizes,
            strides=strides,
            paddings=paddings,
        )
        if depth == 0:
            raise ValueError(f"{who}: Null depth is not permitted with {who}; pass depth >= 1.")
        cells = _per_layer(who, num_cells, depth, "num_cells")
        kernels = _per_layer(who, kernel_sizes, depth, "kernel_sizes")
        strides_ = _per_layer(who, strides, depth, "strides")
        pads = _per_layer(who, paddings, depth, "paddings")
        acts = _per_layer(who, activation_kwargs or {}, depth, "activation_kwargs")
        norms = _per_layer(who, norm_kwargs or {}, depth, "norm_kwargs")
        self.in_features, self.depth, self.num_cells = in_features, depth, cells
        self.out_features = cells[-1]
        layers: list[nn.Module] = []
        in_ch = in_features
        for i in range(depth):
            kw = {
                "kernel_size": kernels[i],
                "stride": strides_[i],
                "padding": pads[i],
                "bias": bias_last_layer if i == depth - 1 else True,
                "device": device,
            }
            conv = (
                self._lazy_conv(cells[i], **kw)
                if in_ch is None
                else self._conv(in_ch, cells[i], **kw)
            )
            layers += [conv, activation_class(**acts[i])]
            if norm_class is not None:
                layers.append(norm_class(**norms[i]))
            in_ch = cells[i]
        if aggregator_class is not None:
            if aggregator_kwargs is None:
                aggregator_kwargs = {"ndims_in": self._spatial_dims + 1}
            layers.append(aggregator_class(**aggregator_kwargs))
        self.layers = nn.Sequential(*layers)
        self.squeeze_output = squeeze_output
        if device is not None:
            self.to(device)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        n = self._spatial_dims + 1
        if inputs.ndim < n:
            raise ValueError(
                f"{type(self).__name__}: the input must have at least {n} dimensions "
                f"([*B, C, {'D, ' if n == 4 else ''}H, W]), got shape {tuple(inputs.shape)}."
            )
        batch = inputs.shape[:-n]
        out = self.layers(inputs.reshape(-1, *inputs.shape[-n:]))
        out = out.reshape(*batch, *out.shape[1:])
        if self.squeeze_output:
            while out.ndim > len(batch) and out.shape[-1] == 1:
                out = out.squeeze(-1)
        return out


class ConvNet(_ConvStack):
    """A stack of ``nn.Conv2d`` layers with activations, then an aggregator.

    Each layer is ``conv -> activation -> norm`` (norm only when asked; it is
    built with ``norm_kwargs`` only, e.g. ``{"num_features": 32}``, or use a
    lazy norm). Accepts any number of leading batch dims: ``[*B, C, H, W]``.

    Args:
        in_features: input channels, or ``None`` for a lazy first layer.
        depth: number of conv layers. Defaults to the length of the per-layer
            lists (``num_cells``, ``kernel_sizes``, ...), 3 with none.
        num_cells: output channels per layer. Default ``[32, 32, 32]``.
        kernel_sizes: int or one per layer. Default 3.
        strides: int or one per layer. Default 1.
        paddings: int or one per layer. Default 0.
        activation_class: activation after each conv. Default ``nn.ELU``.
        activation_kwargs: its keyword arguments (one dict or one per layer).
        norm_class: optional normalisation after each activation.
        norm_kwargs: its keyword arguments (one dict or one per layer).
        bias_last_layer: whether the last conv has a bias.
        aggregator_class: module applied to the features. Default :class:`SquashDims`.
        aggregator_kwargs: its keyword arguments (default ``{"ndims_in": 3}``).
        squeeze_output: squeeze singleton trailing dims of the output.
        device: where the parameters live.

    Examples:
        >>> import torch
        >>> net = ConvNet(in_features=3, num_cells=[8, 8], kernel_sizes=3, strides=2)
        >>> net(torch.zeros(4, 5, 3, 16, 16)).shape
        torch.Size([4, 5, 72])
    """

    _conv = nn.Conv2d
    _lazy_conv = nn.LazyConv2d
    _spatial_dims = 2


class Conv3dNet(_ConvStack):
    """A stack of ``nn.Conv3d`` layers with activations, then an aggregator.

    Same arguments as :class:`ConvNet`; the input is ``[*B, C, D, H, W]`` and
    the default aggregator flattens the last 4 dims. ``depth=0`` is refused.

    Examples:
        >>> import torch
        >>> net = Conv3dNet(in_features=2, num_cells=[4, 4])
        >>> net(torch.zeros(5, 2, 8, 8, 8)).shape
        torch.Size([5, 256])
    """

    _conv = nn.Conv3d
    _lazy_conv = nn.LazyConv3d
    _spatial_dims = 3
