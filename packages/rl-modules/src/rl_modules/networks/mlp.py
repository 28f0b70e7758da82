"""Multi-layer perceptron."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn


def _per_layer(value: Any, depth: int, name: str) -> list:
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != depth:
            raise ValueError(f"MLP: {name} has {len(value)} entries but depth is {depth}.")
        return list(value)
    return [value] * depth


class MLP(nn.Sequential):
    """A stack of ``layer_class`` layers with activations (and optional norms / dropout).

    The hidden part has ``depth`` layers of ``num_cells`` units; a last layer
    maps to ``out_features``. ``in_features=None`` makes the first layer lazy.
    ``out_features`` may be a shape: the output's last dim is then reshaped.

    Args:
        in_features: input size, or ``None`` for a lazy first layer.
        out_features: output size (int) or shape (sequence of ints).
        depth: number of hidden layers. Defaults to ``len(num_cells)`` or 3.
        num_cells: hidden widths, an int (repeated) or one per layer. Default 32.
        activation_class: activation after each hidden layer. Default ``nn.Tanh``.
        activation_kwargs: keyword arguments of the activation.
        norm_class: optional normalisation before each hidden activation.
        norm_kwargs: its keyword arguments (the width is passed first).
        dropout: optional dropout probability after each hidden block.
        bias_last_layer: whether the last layer has a bias.
        layer_class: the layer type (``nn.Linear``, ``NoisyLinear``, ...).
        layer_kwargs: extra keyword arguments of every layer.
        activate_last_layer: whether the output goes through the activation too.
        device: where the parameters live.

    Examples:
        >>> import torch
        >>> net = MLP(in_features=4, out_features=2, num_cells=[16, 16])
        >>> net(torch.zeros(10, 4)).shape
        torch.Size([10, 2])
        >>> MLP(out_features=(2, 3), depth=1, num_cells=8)(torch.zeros(5, 4)).shape
        torch.Size([5, 2, 3])
    """

    def __init__(
        self,
        in_features: int | None = None,
        out_features: int | Sequence[int] | None = None,
        depth: int | None = None,
        num_cells: int | Sequence[int] | None = None,
        activation_class: type[nn.Module] = nn.Tanh,
        activation_kwargs: dict | None = None,
        norm_class: type[nn.Module] | None = None,
        norm_kwargs: dict | None = None,
        dropout: float | None = None,
        bias_last_layer: bool = True,
        layer_class: type[nn.Module] = nn.Linear,
        layer_kwargs: dict | None = None,
        activate_last_layer: bool = False,
        device: torch.device | str | None = None,
    ) -> None:
        if out_features is None:
            raise ValueError("MLP: out_features is required (an int or a shape).")
        if depth is None:
            depth = len(num_cells) if isinstance(num_cells, Sequence) else 3
        if num_cells is None:
            num_cells = 32
        cells = _per_layer(num_cells, depth, "num_cells")
        self.in_features = in_features
        self.out_shape = (
            torch.Size([out_features])
            if isinstance(out_features, int)
            else torch.Size(out_features)
        )
        self.out_features = self.out_shape.numel()
        layer_kwargs = dict(layer_kwargs or {})
        layers: list[nn.Module] = []
        widths = [in_features, *cells, self.out_features]
        for i in range(depth + 1):
            last = i == depth
            kwargs = dict(layer_kwargs, device=device)
            if last:
                kwargs["bias"] = bias_last_layer
            if widths[i] is None:
                if layer_class is not nn.Linear:
                    raise ValueError(
                        "MLP: in_features=None (lazy) only works with layer_class=nn.Linear; "
                        "pass in_features."
                    )
                layers.append(nn.LazyLinear(widths[i + 1], **kwargs))
            else:
                layers.append(layer_class(widths[i], widths[i + 1], **kwargs))
            if not last or activate_last_layer:
                if norm_class is not None:
                    layers.append(norm_class(widths[i + 1], **(norm_kwargs or {})))
                layers.append(activation_class(**(activation_kwargs or {})))
                if dropout is not None and not last:
                    layers.append(nn.Dropout(dropout))
        super().__init__(*layers)
        if device is not None:
            self.to(device)

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        """Concatenate the inputs on the last dim and run the stack."""
        x = inputs[0] if len(inputs) == 1 else torch.cat(inputs, -1)
        out = super().forward(x)
        if len(self.out_shape) > 1:
            out = out.unflatten(-1, self.out_shape)
        return out
