"""Triton kernels for the TensorDict RL toolkit (advantage scans, recurrent cells) with exact torch fallbacks."""

from importlib.metadata import version as _version

from rl_kernels import scans
from rl_kernels.estimators import GAE, TDLambdaEstimator, ValueEstimatorKeys, VTrace
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
    "GAE",
    "GRUModule",
    "LSTMModule",
    "RecurrentStatePrimer",
    "StateSpec",
    "TDLambdaEstimator",
    "VTrace",
    "ValueEstimatorKeys",
    "__version__",
    "gru_with_resets",
    "lstm_with_resets",
    "recurrent_mode",
    "rnn_weights",
    "scans",
    "set_recurrent_mode",
]
