"""Convolutional feature extractor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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


def _per_layer(value: Any, depth: int, name: str) -> list:
    if isinstance(value, Sequence):
        if len(value) != depth:
            raise ValueError(f"ConvNet: {name} has {len(value)} entries but depth is {depth}.")
        return list(value)
    return [value] * depth


class ConvNet(nn.Module):
    """A stack of ``nn.Conv2d`` layers with activations, then an aggregator.

    Accepts any number of leading batch dims: ``[*B, C, H, W]``.

    Args:
        in_features: input channels, or ``None`` for a lazy first layer.
        depth: number of conv layers. Defaults to ``len(num_cells)`` or 3.
        num_cells: output channels per layer. Default ``[32, 32, 32]``.
        kernel_sizes: int or one per layer. Default 3.
        strides: int or one per layer. Default 1.
        paddings: int or one per layer. Default 0.
        activation_class: activation after each conv. Default ``nn.ELU``.
        activation_kwargs: its keyword arguments.
        norm_class: optional normalisation after each activation.
        norm_kwargs: its keyword arguments (channels passed first).
        bias_last_layer: whether the last conv has a bias.
        aggregator_class: module applied to the features. Default :class:`SquashDims`.
        aggregator_kwargs: its keyword arguments.
        squeeze_output: squeeze singleton trailing dims of the output.
        device: where the parameters live.

    Examples:
        >>> import torch
        >>> net = ConvNet(in_features=3, num_cells=[8, 8], kernel_sizes=3, strides=2)
        >>> net(torch.zeros(4, 5, 3, 16, 16)).shape
        torch.Size([4, 5, 72])
    """

    def __init__(
        self,
        in_features: int | None = None,
        depth: int | None = None,
        num_cells: int | Sequence[int] | None = None,
        kernel_sizes: int | Sequence[int] = 3,
        strides: int | Sequence[int] = 1,
        paddings: int | Sequence[int] = 0,
        activation_class: type[nn.Module] = nn.ELU,
        activation_kwargs: dict | None = None,
        norm_class: type[nn.Module] | None = None,
        norm_kwargs: dict | None = None,
        bias_last_layer: bool = True,
        aggregator_class: type[nn.Module] | None = SquashDims,
        aggregator_kwargs: dict | None = None,
        squeeze_output: bool = False,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if num_cells is None:
            num_cells = [32] * (depth if depth is not None else 3)
        if depth is None:
            depth = len(num_cells) if isinstance(num_cells, Sequence) else 3
        cells = _per_layer(num_cells, depth, "num_cells")
        kernels = _per_layer(kernel_sizes, depth, "kernel_sizes")
        strides_ = _per_layer(strides, depth, "strides")
        pads = _per_layer(paddings, depth, "paddings")
        layers: list[nn.Module] = []
        in_ch = in_features
        for i in range(depth):
            bias = bias_last_layer if i == depth - 1 else True
            if in_ch is None:
                conv = nn.LazyConv2d(cells[i], kernels[i], strides_[i], pads[i], bias=bias)
            else:
                conv = nn.Conv2d(in_ch, cells[i], kernels[i], strides_[i], pads[i], bias=bias)
            layers += [conv, activation_class(**(activation_kwargs or {}))]
            if norm_class is not None:
                layers.append(norm_class(cells[i], **(norm_kwargs or {})))
            in_ch = cells[i]
        if aggregator_class is not None:
            layers.append(aggregator_class(**(aggregator_kwargs or {})))
        self.layers = nn.Sequential(*layers)
        self.squeeze_output = squeeze_output
        if device is not None:
            self.to(device)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        if pixels.ndim < 3:
            raise ValueError(
                f"ConvNet: expected an input of shape [*B, C, H, W], got {tuple(pixels.shape)}."
            )
        batch = pixels.shape[:-3]
        out = self.layers(pixels.reshape(-1, *pixels.shape[-3:]))
        out = out.reshape(*batch, *out.shape[1:])
        if self.squeeze_output:
            while out.ndim > len(batch) and out.shape[-1] == 1:
                out = out.squeeze(-1)
        return out
