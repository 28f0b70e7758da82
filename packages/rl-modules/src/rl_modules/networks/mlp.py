"""Multi-layer perceptron."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn


def _per_layer(value: Any, n: int, name: str, depth: int) -> list:
    """``value`` repeated ``n`` times, or checked to have ``n`` entries when it is a list."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != n:
            raise ValueError(
                f"MLP: {name} has {len(value)} entries but depth is {depth}, so {n} are needed."
            )
        return list(value)
    return [value] * n


class _SingleBias(nn.Module):
    """Adds one learned scalar to every output (``single_bias_last_layer=True``)."""

    def __init__(self, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(1, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.bias


def _lazy_version(layer_class: Any) -> Any:
    if layer_class is nn.Linear:
        return nn.LazyLinear
    lazy = getattr(layer_class, "lazy_version", None)
    if lazy is None:
        name = getattr(layer_class, "__name__", repr(layer_class))
        raise ValueError(
            f"MLP: in_features=None (a lazy first layer) needs a lazy version of {name}; "
            "nn.Linear and NoisyLinear have one. Pass in_features."
        )
    return lazy


class MLP(nn.Sequential):
    """A stack of ``layer_class`` layers with activations (and optional dropout / norms).

    Each hidden block is ``layer -> Dropout -> norm -> activation`` (dropout
    and norm only when asked), as in TorchRL. ``depth`` hidden layers of
    ``num_cells`` units are followed by a last layer mapping to
    ``out_features``. With neither ``depth`` nor ``num_cells`` the network is
    one layer. ``in_features=None`` makes the first layer lazy.
    ``out_features`` may be a shape: the output's last dim is then reshaped.

    Args:
        in_features: input size, or ``None`` for a lazy first layer.
        out_features: output size (int) or shape (sequence of ints).
        depth: number of hidden layers. Defaults to ``len(num_cells)``, or 0
            when ``num_cells`` is not given either.
        num_cells: hidden widths, an int (repeated ``depth`` times) or one per
            layer. Defaults to 32 when ``depth`` is given.
        activation_class: activation class or callable. Default ``nn.Tanh``.
        activation_kwargs: its keyword arguments, one dict or one per
            activation (``depth + activate_last_layer``).
        norm_class: optional normalisation class or callable, built with
            ``norm_kwargs`` only (give it its width, e.g.
            ``norm_kwargs={"num_features": 32}``, or use a lazy norm).
        norm_kwargs: one dict or one per norm layer.
        dropout: dropout probability after each activated layer (``None``: none).
        bias_last_layer: whether the last layer has a bias.
        single_bias_last_layer: the last layer has no per-output bias but one
            learned scalar added to every output.
        layer_class: the layer type (``nn.Linear``, ``NoisyLinear``, or any
            callable ``(in, out, bias=..., **layer_kwargs)``).
        layer_kwargs: extra keyword arguments of the layers, one dict or one
            per layer (``depth + 1``); a ``"bias"`` entry overrides the default.
        activate_last_layer: whether the output goes through the activation too.
        device: where the parameters live.

    Examples:
        >>> import torch
        >>> net = MLP(in_features=4, out_features=2, num_cells=[16, 16])
        >>> net(torch.zeros(10, 4)).shape
        torch.Size([10, 2])
        >>> MLP(out_features=(2, 3), depth=1, num_cells=8)(torch.zeros(5, 4)).shape
        torch.Size([5, 2, 3])
        >>> len(MLP(in_features=3, out_features=6))  # one linear layer
        1
    """

    def __init__(
        self,
        in_features: int | None = None,
        out_features: int | Sequence[int] | None = None,
        depth: int | None = None,
        num_cells: int | Sequence[int] | None = None,
        activation_class: type[nn.Module] | Callable = nn.Tanh,
        activation_kwargs: dict | Sequence[dict] | None = None,
        norm_class: type[nn.Module] | Callable | None = None,
        norm_kwargs: dict | Sequence[dict] | None = None,
        dropout: float | None = None,
        bias_last_layer: bool = True,
        single_bias_last_layer: bool = False,
        layer_class: type[nn.Module] | Callable = nn.Linear,
        layer_kwargs: dict | Sequence[dict] | None = None,
        activate_last_layer: bool = False,
        device: torch.device | str | None = None,
    ) -> None:
        if out_features is None:
            raise ValueError("MLP: out_features is required (an int or a shape).")
        if num_cells is None:
            num_cells = [] if depth is None else [32] * depth
        if depth is None:
            if not isinstance(num_cells, Sequence):
                raise ValueError(
                    f"MLP: num_cells={num_cells} is an int, so depth is needed too "
                    "(or pass one width per layer: num_cells=[...])."
                )
            depth = len(num_cells)
        cells = _per_layer(num_cells, depth, "num_cells", depth)
        self.in_features = in_features
        self.depth = depth
        self.num_cells = cells
        self.out_shape = (
            torch.Size([out_features])
            if isinstance(out_features, int)
            else torch.Size(out_features)
        )
        self.out_features = out_features
        self._reshape_out = not isinstance(out_features, int)
        n_act = depth + int(activate_last_layer)
        acts = _per_layer(activation_kwargs or {}, n_act, "activation_kwargs", depth)
        norms = _per_layer(norm_kwargs or {}, n_act, "norm_kwargs", depth)
        lkw = _per_layer(layer_kwargs or {}, depth + 1, "layer_kwargs", depth)
        widths = [in_features, *cells, self.out_shape.numel()]
        layers: list[nn.Module] = []
        for i in range(depth + 1):
            last = i == depth
            kwargs = dict(lkw[i])
            bias = kwargs.pop(
                "bias", bias_last_layer and not single_bias_last_layer if last else True
            )
            if widths[i] is None:
                layer = _lazy_version(layer_class)(
                    widths[i + 1], bias=bias, device=device, **kwargs
                )
            else:
                layer = layer_class(widths[i], widths[i + 1], bias=bias, device=device, **kwargs)
            layers.append(layer)
            if last and single_bias_last_layer:
                layers.append(_SingleBias(device))
            if not last or activate_last_layer:
                if dropout is not None:
                    layers.append(nn.Dropout(dropout))
                if norm_class is not None:
                    layers.append(norm_class(**norms[i]))
                act = activation_class(**acts[i])
                layers.append(act if isinstance(act, nn.Module) else _Callable(act))
        super().__init__(*layers)
        if device is not None:
            self.to(device)

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        """Concatenate the inputs on the last dim and run the stack."""
        x = inputs[0] if len(inputs) == 1 else torch.cat(inputs, -1)
        out = super().forward(x)
        if self._reshape_out:
            out = out.unflatten(-1, self.out_shape)
        return out


class _Callable(nn.Module):
    """Wraps a plain callable (e.g. a lambda activation) as a module."""

    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)
