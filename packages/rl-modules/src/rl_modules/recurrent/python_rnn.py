"""LSTM and GRU written with plain tensor ops (no cuDNN kernel): ``torch.vmap`` and ``torch.compile`` friendly.

They hold the same parameters as ``nn.LSTM`` / ``nn.GRU`` (they subclass them, so
``state_dict`` files are interchangeable) and compute the same values.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F


def lstm_cell(
    x: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    b_ih: torch.Tensor | None,
    b_hh: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM step (Hochreiter and Schmidhuber, 1997; PyTorch's gate order i, f, g, o)."""
    i, f, g, o = (F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c_new = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c_new.tanh(), c_new


def gru_cell(
    x: torch.Tensor,
    h: torch.Tensor,
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    b_ih: torch.Tensor | None,
    b_hh: torch.Tensor | None,
) -> torch.Tensor:
    """One GRU step (Cho et al., 2014; PyTorch's gate order r, z, n)."""
    x_r, x_z, x_n = F.linear(x, w_ih, b_ih).chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = (x_r + h_r).sigmoid()
    z = (x_z + h_z).sigmoid()
    n = (x_n + r * h_n).tanh()
    return n + z * (h - n)


def _layer_weights(rnn: nn.RNNBase, layer: int) -> list[torch.Tensor | None]:
    return [
        getattr(rnn, f"weight_ih_l{layer}"),
        getattr(rnn, f"weight_hh_l{layer}"),
        getattr(rnn, f"bias_ih_l{layer}", None),
        getattr(rnn, f"bias_hh_l{layer}", None),
    ]


States = tuple[torch.Tensor, ...]
Cell = Callable[..., States]


def _lstm_step(x: torch.Tensor, state: States, *weights: torch.Tensor | None) -> States:
    return lstm_cell(x, state[0], state[1], *weights)


def _gru_step(x: torch.Tensor, state: States, *weights: torch.Tensor | None) -> States:
    return (gru_cell(x, state[0], *weights),)


def _unroll(
    rnn: nn.RNNBase, input: torch.Tensor, hx: States | None, n_states: int, step: Cell
) -> tuple[torch.Tensor, States]:
    """Run every layer of ``rnn`` step by step through time.

    Args:
        rnn: the module holding the weights (``nn.LSTM`` / ``nn.GRU`` layout).
        input: ``[N, T, F]`` (``[T, N, F]`` without ``batch_first``).
        hx: the initial states, each ``[layers, N, H]``; zeros when ``None``.
        n_states: states per layer (2 for an LSTM: ``h``, ``c``; 1 for a GRU).
        step: ``step(x, state, *weights) -> state``, the hidden state first.

    Returns:
        the last layer's hidden states at every step, and the final states of every layer.
    """
    _check_input(rnn, input)
    x = input if rnn.batch_first else input.transpose(0, 1)
    if hx is None:
        zeros = x.new_zeros(rnn.num_layers, x.shape[0], rnn.hidden_size)
        hx = (zeros,) * n_states
    states = list(zip(*(h.unbind(0) for h in hx), strict=True))
    outputs = []
    for t in range(x.shape[1]):
        inp = x[:, t]
        for layer in range(rnn.num_layers):
            states[layer] = step(inp, states[layer], *_layer_weights(rnn, layer))
            inp = states[layer][0]
            if rnn.dropout and layer < rnn.num_layers - 1:
                inp = F.dropout(inp, rnn.dropout, rnn.training)
        outputs.append(inp)
    out = torch.stack(outputs, 1 if rnn.batch_first else 0)
    return out, tuple(torch.stack(per_state) for per_state in zip(*states, strict=True))


def _check_input(rnn: nn.RNNBase, x: torch.Tensor) -> None:
    if x.dim() != 3:
        raise ValueError(
            f"{type(rnn).__name__}: expected a 3-d input ({'[N, T, F]' if rnn.batch_first else '[T, N, F]'}), "
            f"got shape {tuple(x.shape)}."
        )


class LSTM(nn.LSTM):
    """A multi-layer LSTM computed step by step in Python (same parameters as ``nn.LSTM``).

    Args:
        input_size: input features.
        hidden_size: hidden units.
        num_layers: stacked layers.
        batch_first: ``[N, T, F]`` inputs (default ``True``, as TorchRL).
        bias: use biases.
        dropout: dropout between layers (training mode only).
        bidirectional: must be ``False``.
        proj_size: must be 0.
        device: where the parameters live.
        dtype: their dtype.

    Examples:
        >>> import torch
        >>> lstm = LSTM(input_size=3, hidden_size=5, num_layers=2)
        >>> out, (h, c) = lstm(torch.randn(4, 7, 3))
        >>> out.shape, h.shape
        (torch.Size([4, 7, 5]), torch.Size([2, 4, 5]))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        batch_first: bool = True,
        bias: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if bidirectional or proj_size:
            raise NotImplementedError(
                "LSTM (python): bidirectional and proj_size LSTMs are not supported; use nn.LSTM."
            )
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            False,
            0,
            device=device,
            dtype=dtype,
        )

    def forward(  # type: ignore[override]
        self, input: torch.Tensor, hx: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        out, (h, c) = _unroll(self, input, hx, 2, _lstm_step)
        return out, (h, c)


class GRU(nn.GRU):
    """A multi-layer GRU computed step by step in Python (same parameters as ``nn.GRU``).

    Args:
        input_size: input features.
        hidden_size: hidden units.
        num_layers: stacked layers.
        bias: use biases.
        batch_first: ``[N, T, F]`` inputs (default ``True``, as TorchRL).
        dropout: dropout between layers (training mode only).
        bidirectional: must be ``False``.
        device: where the parameters live.
        dtype: their dtype.

    Examples:
        >>> import torch
        >>> gru = GRU(input_size=3, hidden_size=5)
        >>> out, h = gru(torch.randn(4, 7, 3))
        >>> out.shape, h.shape
        (torch.Size([4, 7, 5]), torch.Size([1, 4, 5]))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if bidirectional:
            raise NotImplementedError(
                "GRU (python): bidirectional GRUs are not supported; use nn.GRU."
            )
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            False,
            device=device,
            dtype=dtype,
        )

    def forward(  # type: ignore[override]
        self, input: torch.Tensor, hx: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out, (h,) = _unroll(self, input, None if hx is None else (hx,), 1, _gru_step)
        return out, h


class LSTMCell(nn.LSTMCell):
    """``nn.LSTMCell`` computed with plain tensor ops (vmap / compile friendly).

    Examples:
        >>> import torch
        >>> cell = LSTMCell(3, 5)
        >>> h, c = cell(torch.randn(4, 3))
        >>> h.shape
        torch.Size([4, 5])
    """

    def forward(  # type: ignore[override]
        self, input: torch.Tensor, hx: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if input.dim() not in (1, 2):
            raise ValueError(f"LSTMCell: expected a 1-d or 2-d input, got {input.dim()}-d.")
        if hx is None:
            zeros = input.new_zeros(*input.shape[:-1], self.hidden_size)
            hx = (zeros, zeros)
        return lstm_cell(
            input, hx[0], hx[1], self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh
        )


class GRUCell(nn.GRUCell):
    """``nn.GRUCell`` computed with plain tensor ops (vmap / compile friendly).

    Examples:
        >>> import torch
        >>> GRUCell(3, 5)(torch.randn(4, 3)).shape
        torch.Size([4, 5])
    """

    def forward(  # type: ignore[override]
        self, input: torch.Tensor, hx: torch.Tensor | None = None
    ) -> torch.Tensor:
        if input.dim() not in (1, 2):
            raise ValueError(f"GRUCell: expected a 1-d or 2-d input, got {input.dim()}-d.")
        if hx is None:
            hx = input.new_zeros(*input.shape[:-1], self.hidden_size)
        return gru_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
