"""Triton kernels for the TensorDict RL toolkit (advantage scans, recurrent cells) with exact torch fallbacks."""

from importlib.metadata import version as _version

from rl_kernels.recurrent import (
    GRUModule,
    LSTMModule,
    RecurrentStatePrimer,
    StateSpec,
    gru_with_resets,
    lstm_with_resets,
    recurrent_mode,
    rnn_weights,
    set_recurrent_mode,
)

__version__ = _version("rl-kernels")

__all__ = [
    "GRUModule",
    "LSTMModule",
    "RecurrentStatePrimer",
    "StateSpec",
    "__version__",
    "gru_with_resets",
    "lstm_with_resets",
    "recurrent_mode",
    "rnn_weights",
    "set_recurrent_mode",
]
