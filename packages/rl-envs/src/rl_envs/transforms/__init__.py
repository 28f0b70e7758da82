"""Env transforms: one transform (or a tight family) per file, TorchRL names and semantics."""

from rl_envs.transforms.cat_frames import CatFrames
from rl_envs.transforms.compose import Compose
from rl_envs.transforms.dtype_cast import DoubleToFloat, DTypeCastTransform
from rl_envs.transforms.image import CenterCrop, GrayScale, Resize, ToTensorImage
from rl_envs.transforms.init_tracker import InitTracker
from rl_envs.transforms.observation_norm import ObservationNorm
from rl_envs.transforms.primer import TensorDictPrimer
from rl_envs.transforms.reward_sum import RewardSum
from rl_envs.transforms.step_counter import StepCounter
from rl_envs.transforms.transform import EnvSpecs, Transform
from rl_envs.transforms.vecnorm import VecNorm

__all__ = [
    "CatFrames",
    "CenterCrop",
    "Compose",
    "DTypeCastTransform",
    "DoubleToFloat",
    "EnvSpecs",
    "GrayScale",
    "InitTracker",
    "ObservationNorm",
    "Resize",
    "RewardSum",
    "StepCounter",
    "TensorDictPrimer",
    "ToTensorImage",
    "Transform",
    "VecNorm",
]
