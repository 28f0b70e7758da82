"""Recurrent modules (LSTM, GRU) with hidden states as TensorDict keys."""

from rl_modules.recurrent.canonical import canonicalize_rnn_subset
from rl_modules.recurrent.mode import recurrent_mode, set_recurrent_mode
from rl_modules.recurrent.precision import (
    get_recurrent_matmul_precision,
    set_recurrent_matmul_precision,
)
from rl_modules.recurrent.primer import RecurrentStatePrimer, StateSpec
from rl_modules.recurrent.python_rnn import GRU, LSTM, GRUCell, LSTMCell
from rl_modules.recurrent.rnn import GRUModule, LSTMModule

__all__ = [
    "GRU",
    "LSTM",
    "GRUCell",
    "GRUModule",
    "LSTMCell",
    "LSTMModule",
    "RecurrentStatePrimer",
    "StateSpec",
    "canonicalize_rnn_subset",
    "get_recurrent_matmul_precision",
    "recurrent_mode",
    "set_recurrent_matmul_precision",
    "set_recurrent_mode",
]
