"""Env transforms: one transform (or a tight family) per file, TorchRL names and semantics."""

from rl_envs.transforms.action import FlattenAction
from rl_envs.transforms.action_chunk import (
    ACTION_CHUNK_KEY,
    ACTION_IS_PAD_KEY,
    ActionChunkTransform,
)
from rl_envs.transforms.action_discretizer import ActionDiscretizer
from rl_envs.transforms.action_mask import ActionMask
from rl_envs.transforms.action_scaling import ActionScaling
from rl_envs.transforms.action_tokenizer import ACTION_TOKENS_KEY, ActionTokenizerTransform
from rl_envs.transforms.batch_size import BatchSizeTransform
from rl_envs.transforms.burn_in import BurnInTransform
from rl_envs.transforms.cat_frames import CatFrames
from rl_envs.transforms.cat_tensors import CatTensors
from rl_envs.transforms.clip import ClipTransform
from rl_envs.transforms.compose import Compose
from rl_envs.transforms.conditional_policy_switch import ConditionalPolicySwitch
from rl_envs.transforms.conditional_skip import ConditionalSkip
from rl_envs.transforms.crop import Crop
from rl_envs.transforms.device_cast import DeviceCastTransform
from rl_envs.transforms.discrete_action_projection import DiscreteActionProjection
from rl_envs.transforms.dtype_cast import DoubleToFloat, DTypeCastTransform
from rl_envs.transforms.end_of_life import EndOfLifeTransform
from rl_envs.transforms.expand_as import ExpandAs
from rl_envs.transforms.finite_check import FiniteTensorDictCheck
from rl_envs.transforms.frame_skip import FrameSkipTransform
from rl_envs.transforms.from_module import get_env_transforms_from_module, get_primers_from_module
from rl_envs.transforms.gsde_noise import gSDENoise
from rl_envs.transforms.hash import Hash
from rl_envs.transforms.image import CenterCrop, GrayScale, Resize, ToTensorImage
from rl_envs.transforms.init_tracker import InitTracker
from rl_envs.transforms.keys import ExcludeTransform, RenameTransform, SelectTransform
from rl_envs.transforms.linearise_rewards import LineariseRewards
from rl_envs.transforms.macro_primitive import (
    HumanoidMacroAction,
    MacroAction,
    MacroPrimitive,
    MacroPrimitiveTransform,
    TargetMacroAction,
)
from rl_envs.transforms.module_transform import ModuleTransform
from rl_envs.transforms.multi_action import MultiAction
from rl_envs.transforms.multi_step import MultiStepTransform
from rl_envs.transforms.next_observation_delta import NextObservationDelta
from rl_envs.transforms.next_state_reconstructor import NextStateReconstructor
from rl_envs.transforms.noop_reset import NoopResetEnv
from rl_envs.transforms.observation_norm import ObservationNorm
from rl_envs.transforms.permute import PermuteTransform
from rl_envs.transforms.pin_memory import PinMemoryTransform
from rl_envs.transforms.policy_age_filter import PolicyAgeFilter
from rl_envs.transforms.primer import TensorDictPrimer
from rl_envs.transforms.random_crop import RandomCropTensorDict
from rl_envs.transforms.random_truncation import RandomTruncationTransform
from rl_envs.transforms.remove_empty_specs import RemoveEmptySpecs
from rl_envs.transforms.reward2go import Reward2GoTransform
from rl_envs.transforms.reward_norm import NormalizeReward
from rl_envs.transforms.reward_ops import (
    BinarizeReward,
    RewardClipping,
    RewardScaling,
    SignTransform,
)
from rl_envs.transforms.reward_sum import RewardSum
from rl_envs.transforms.satellite_attitude import SatelliteAttitudeTransform, SatelliteMacroAction
from rl_envs.transforms.shape import FlattenObservation, UnsqueezeTransform
from rl_envs.transforms.squeeze import SqueezeTransform
from rl_envs.transforms.stack import Stack
from rl_envs.transforms.step_counter import StepCounter
from rl_envs.transforms.success_reward import SuccessReward
from rl_envs.transforms.target_return import TargetReturn
from rl_envs.transforms.terminate import TerminateTransform
from rl_envs.transforms.time_max_pool import TimeMaxPool
from rl_envs.transforms.timer import Timer
from rl_envs.transforms.traj_counter import TrajCounter
from rl_envs.transforms.transform import FORWARD_NOT_IMPLEMENTED, EnvSpecs, Transform
from rl_envs.transforms.urscript import (
    CartesianSolver,
    RobotMacroAction,
    RobotMacroActionMode,
    URScriptPrimitive,
    URScriptPrimitiveTransform,
)
from rl_envs.transforms.vecnorm import VecNorm
from rl_envs.transforms.vecnorm_v2 import VecNormV2
from rl_envs.transforms.video_recorder import VideoRecorder

__all__ = [
    "ACTION_CHUNK_KEY",
    "ACTION_IS_PAD_KEY",
    "ACTION_TOKENS_KEY",
    "FORWARD_NOT_IMPLEMENTED",
    "ActionChunkTransform",
    "ActionDiscretizer",
    "ActionMask",
    "ActionScaling",
    "ActionTokenizerTransform",
    "BatchSizeTransform",
    "BinarizeReward",
    "BurnInTransform",
    "CartesianSolver",
    "CatFrames",
    "CatTensors",
    "CenterCrop",
    "ClipTransform",
    "Compose",
    "ConditionalPolicySwitch",
    "ConditionalSkip",
    "Crop",
    "DTypeCastTransform",
    "DeviceCastTransform",
    "DiscreteActionProjection",
    "DoubleToFloat",
    "EndOfLifeTransform",
    "EnvSpecs",
    "ExcludeTransform",
    "ExpandAs",
    "FiniteTensorDictCheck",
    "FlattenAction",
    "FlattenObservation",
    "FrameSkipTransform",
    "GrayScale",
    "Hash",
    "HumanoidMacroAction",
    "InitTracker",
    "LineariseRewards",
    "MacroAction",
    "MacroPrimitive",
    "MacroPrimitiveTransform",
    "ModuleTransform",
    "MultiAction",
    "MultiStepTransform",
    "NextObservationDelta",
    "NextStateReconstructor",
    "NoopResetEnv",
    "NormalizeReward",
    "ObservationNorm",
    "PermuteTransform",
    "PinMemoryTransform",
    "PolicyAgeFilter",
    "RandomCropTensorDict",
    "RandomTruncationTransform",
    "RemoveEmptySpecs",
    "RenameTransform",
    "Resize",
    "Reward2GoTransform",
    "RewardClipping",
    "RewardScaling",
    "RewardSum",
    "RobotMacroAction",
    "RobotMacroActionMode",
    "SatelliteAttitudeTransform",
    "SatelliteMacroAction",
    "SelectTransform",
    "SignTransform",
    "SqueezeTransform",
    "Stack",
    "StepCounter",
    "SuccessReward",
    "TargetMacroAction",
    "TargetReturn",
    "TensorDictPrimer",
    "TerminateTransform",
    "TimeMaxPool",
    "Timer",
    "ToTensorImage",
    "TrajCounter",
    "Transform",
    "URScriptPrimitive",
    "URScriptPrimitiveTransform",
    "UnsqueezeTransform",
    "VecNorm",
    "VecNormV2",
    "VideoRecorder",
    "gSDENoise",
    "get_env_transforms_from_module",
    "get_primers_from_module",
]
