"""Loggers with TorchRL's names and signatures (``torchrl.record.loggers``).

``CSVLogger`` needs nothing beyond torch; ``TensorboardLogger``, ``WandbLogger``
and ``MLFlowLogger`` import their back-end only when built (extras
``tensorboard``, ``wandb``, ``mlflow``), so importing this module is cheap.
"""

from rl_trainers.loggers.common import Logger
from rl_trainers.loggers.csv import CSVExperiment, CSVLogger
from rl_trainers.loggers.mlflow import MLFlowLogger
from rl_trainers.loggers.tensorboard import TensorboardLogger
from rl_trainers.loggers.utils import generate_exp_name, get_logger
from rl_trainers.loggers.wandb import WandbLogger

__all__ = [
    "CSVExperiment",
    "CSVLogger",
    "Logger",
    "MLFlowLogger",
    "TensorboardLogger",
    "WandbLogger",
    "generate_exp_name",
    "get_logger",
]
