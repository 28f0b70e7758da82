"""The data side of vision-language-action (VLA) work: the TensorDict keys, robot dataset
metadata and action tokenizers (TorchRL's ``torchrl.data.vla``)."""

from rl_envs.vla.metadata import ActionSpace, GripperMode, RobotDatasetMetadata
from rl_envs.vla.schema import (
    ACTION_CHUNK_KEY,
    ACTION_IS_PAD_KEY,
    ACTION_KEY,
    ACTION_TOKENS_KEY,
    IMAGE_KEY,
    INSTRUCTION_KEY,
    OBSERVATION_KEY,
    STATE_KEY,
    VLA_ACTION_KEY,
)
from rl_envs.vla.tokenizers import UniformActionTokenizer

__all__ = [
    "ACTION_CHUNK_KEY",
    "ACTION_IS_PAD_KEY",
    "ACTION_KEY",
    "ACTION_TOKENS_KEY",
    "IMAGE_KEY",
    "INSTRUCTION_KEY",
    "OBSERVATION_KEY",
    "STATE_KEY",
    "VLA_ACTION_KEY",
    "ActionSpace",
    "GripperMode",
    "RobotDatasetMetadata",
    "UniformActionTokenizer",
]
