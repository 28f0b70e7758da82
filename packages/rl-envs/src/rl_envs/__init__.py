"""Environments for the TensorDict RL toolkit: specs, EnvBase, Gymnasium / DM Control / MuJoCo / pure-torch envs, transforms, batched envs."""

from importlib.metadata import version as _version

from rl_envs.auto_reset import AutoResetEnv, AutoResetTransform
from rl_envs.auto_unwrap import auto_unwrap_transformed_env, set_auto_unwrap_transformed_env
from rl_envs.batched import (
    AsyncEnvPool,
    ParallelEnv,
    SerialEnv,
    WorkerError,
    WorkerTimeoutError,
)
from rl_envs.env_base import EnvBase
from rl_envs.libs.backend import gym_backend, set_gym_backend
from rl_envs.libs.dm_control import DMControlEnv, DMControlWrapper
from rl_envs.libs.gym import GymEnv, GymWrapper, register_gym_spec_conversion
from rl_envs.libs.gym_export import register_gym
from rl_envs.libs.marl import MarlGroupMapType, check_marl_grouping
from rl_envs.libs.pettingzoo import PettingZooEnv, PettingZooWrapper
from rl_envs.libs.vmas import VmasEnv, VmasWrapper
from rl_envs.model_based import DreamerEnv, ModelBasedEnvBase, WorldModelEnv
from rl_envs.mujoco import (
    AntEnv,
    CubeBowlEnv,
    HalfCheetahEnv,
    HopperEnv,
    MacroActionEnv,
    MujocoEnv,
    SatelliteEnv,
    Walker2dEnv,
)
from rl_envs.pendulum import PendulumEnv
from rl_envs.specs import (
    Binary,
    Bounded,
    BoundedContinuous,
    BoundedDiscrete,
    Categorical,
    Choice,
    Composite,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    Stacked,
    StackedComposite,
    TensorSpec,
    Unbounded,
    UnboundedContinuous,
    UnboundedDiscrete,
    make_composite_from_td,
)
from rl_envs.specs.consolidate import check_no_exclusive_keys, consolidate_spec
from rl_envs.specs.legacy import *  # noqa: F403  (deprecated TorchRL spec names)
from rl_envs.specs.legacy import __all__ as _legacy_all
from rl_envs.tictactoe import TicTacToeEnv
from rl_envs.toy_vla import ToyVLAEnv
from rl_envs.trading import FinancialRegimeEnv
from rl_envs.transformed_env import TransformedEnv
from rl_envs.transforms import *  # noqa: F403  (the catalogue: see rl_envs.transforms.__all__)
from rl_envs.transforms import __all__ as _transforms_all
from rl_envs.utils import EnvCreator, EnvMetaData, check_env_specs, get_env_metadata, step_mdp
from rl_envs.vla import RobotDatasetMetadata, UniformActionTokenizer

__version__ = _version("rl-envs")

__all__ = [
    # specs
    "Binary",
    "Bounded",
    "Categorical",
    "Composite",
    "DMControlEnv",
    "DMControlWrapper",
    "EnvBase",
    "EnvCreator",
    "EnvMetaData",
    "GymEnv",
    "GymWrapper",
    "MultiCategorical",
    "MultiOneHot",
    "NonTensor",
    "OneHot",
    "PendulumEnv",
    "TensorSpec",
    "ToyVLAEnv",
    "Unbounded",
    "__version__",
    "check_env_specs",
    "check_no_exclusive_keys",
    "consolidate_spec",
    "make_composite_from_td",
    "register_gym",
    "step_mdp",
]

# Transforms and batched envs.
__all__ += [
    "AsyncEnvPool",
    "ParallelEnv",
    "SerialEnv",
    "TransformedEnv",
    "WorkerError",
    "WorkerTimeoutError",
    *_transforms_all,
]
# Multi-agent envs.
__all__ += [
    "MarlGroupMapType",
    "PettingZooEnv",
    "PettingZooWrapper",
    "VmasEnv",
    "VmasWrapper",
    "check_marl_grouping",
]
__all__ += [
    "BoundedContinuous",
    "BoundedDiscrete",
    "Choice",
    "Stacked",
    "StackedComposite",
    "UnboundedContinuous",
    "UnboundedDiscrete",
    "gym_backend",
    "set_gym_backend",
    *_legacy_all,
]

# Native MuJoCo envs (rl_envs.mujoco; the mujoco package is imported when one is built).
__all__ += [
    "AntEnv",
    "CubeBowlEnv",
    "HalfCheetahEnv",
    "HopperEnv",
    "MacroActionEnv",
    "MujocoEnv",
    "SatelliteEnv",
    "Walker2dEnv",
]
__all__ += ["DreamerEnv", "ModelBasedEnvBase", "WorldModelEnv"]
# Scoped modes (TorchRL exposes them at the root: torchrl.set_auto_unwrap_transformed_env).
__all__ += ["auto_unwrap_transformed_env", "set_auto_unwrap_transformed_env"]
__all__ += ["AutoResetEnv", "AutoResetTransform", "get_env_metadata"]
__all__ += ["FinancialRegimeEnv", "TicTacToeEnv", "register_gym_spec_conversion"]
__all__ += ["RobotDatasetMetadata", "UniformActionTokenizer"]
