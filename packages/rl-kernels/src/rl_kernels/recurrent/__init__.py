"""Recurrent cells (LSTM, GRU) with per-step resets: pure functions and TensorDict modules."""

from rl_kernels.recurrent.functional import gru_with_resets, lstm_with_resets, rnn_weights
from rl_kernels.recurrent.mode import recurrent_mode, set_recurrent_mode
from rl_kernels.recurrent.modules import GRUModule, LSTMModule
from rl_kernels.recurrent.primer import RecurrentStatePrimer, StateSpec

__all__ = [
    "GRUModule",
    "LSTMModule",
    "RecurrentStatePrimer",
    "StateSpec",
    "gru_with_resets",
    "lstm_with_resets",
    "recurrent_mode",
    "rnn_weights",
    "set_recurrent_mode",
]
