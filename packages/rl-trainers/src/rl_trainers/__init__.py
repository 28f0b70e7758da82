"""Trainer with hooks, loggers (CSV, TensorBoard, W&B, MLflow), structured configs and fake-data helpers.

Names follow ``torchrl.trainers`` and ``torchrl.record.loggers``. The package
imports torch and tensordict only; each logger back-end and Hydra is an extra
imported when used. Collectors, losses, buffers and envs are duck-typed.
"""

from importlib.metadata import version as _version

from rl_trainers.configs import (
    CollectorConfig,
    EvaluationConfig,
    LoggerConfig,
    OptimizerConfig,
    ReplayBufferConfig,
    RunConfig,
    TrainerConfig,
    make_logger,
    make_optimizer,
    make_trainer,
    register_configs,
)
from rl_trainers.evaluation import LogValidationReward, Recorder, episode_returns
from rl_trainers.fake import FakeCollector, FieldSpec
from rl_trainers.hooks import (
    BatchSubSampler,
    ClearCudaCache,
    CountFramesLog,
    LogReward,
    LogScalar,
    OptimizerHook,
    ReplayBufferTrainer,
    SelectKeys,
    TrainerHookBase,
    UpdateWeights,
    mask_batch,
)
from rl_trainers.loggers import (
    CSVLogger,
    Logger,
    MLFlowLogger,
    TensorboardLogger,
    WandbLogger,
    generate_exp_name,
    get_logger,
)
from rl_trainers.trainer import HOOK_STAGES, Trainer

__version__ = _version("rl-trainers")

__all__ = [
    "HOOK_STAGES",
    "BatchSubSampler",
    "CSVLogger",
    "ClearCudaCache",
    "CollectorConfig",
    "CountFramesLog",
    "EvaluationConfig",
    "FakeCollector",
    "FieldSpec",
    "LogReward",
    "LogScalar",
    "LogValidationReward",
    "Logger",
    "LoggerConfig",
    "MLFlowLogger",
    "OptimizerConfig",
    "OptimizerHook",
    "Recorder",
    "ReplayBufferConfig",
    "ReplayBufferTrainer",
    "RunConfig",
    "SelectKeys",
    "TensorboardLogger",
    "Trainer",
    "TrainerConfig",
    "TrainerHookBase",
    "UpdateWeights",
    "WandbLogger",
    "__version__",
    "episode_returns",
    "generate_exp_name",
    "get_logger",
    "make_logger",
    "make_optimizer",
    "make_trainer",
    "mask_batch",
    "register_configs",
]
