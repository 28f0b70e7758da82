"""Replay buffers for the TensorDict RL toolkit: storages, samplers, writers, prioritized replay (C++/CUDA extension with a torch fallback), HER."""

from importlib.metadata import version as _version

from rl_buffers._checkpoint_files import CheckpointCorruptError, NoSpaceError
from rl_buffers._memory import StorageMemoryError
from rl_buffers.checkpointers import (
    FlatStorageCheckpointer,
    H5StorageCheckpointer,
    NestedStorageCheckpointer,
    StorageCheckpointerBase,
)
from rl_buffers.datasets import (
    D4RLExperienceReplay,
    DatasetFormatError,
    DatasetReplayBuffer,
    MinariExperienceReplay,
)
from rl_buffers.ensemble import ReplayBufferEnsemble
from rl_buffers.her import HERReplayBuffer, HindsightStrategy
from rl_buffers.postprocs import DensifyReward, MultiStep
from rl_buffers.remote import RemoteTensorDictReplayBuffer
from rl_buffers.replay_buffer import ReplayBuffer
from rl_buffers.sample_units import SampleUnit, Sequence, Transition
from rl_buffers.samplers import (
    ConsumingSampler,
    PrioritizedSampler,
    PrioritizedSliceSampler,
    RandomSampler,
    Sampler,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
    StalenessAwareSampler,
)
from rl_buffers.schedulers import (
    LambdaScheduler,
    LinearScheduler,
    ParameterScheduler,
    SchedulerList,
    StepScheduler,
)
from rl_buffers.segment_tree import MinSegmentTree, SumSegmentTree
from rl_buffers.storages import (
    CompressedListStorage,
    LazyMemmapStorage,
    LazyStackStorage,
    LazyTensorStorage,
    ListStorage,
    Storage,
    TensorStorage,
)
from rl_buffers.tensordict_replay_buffer import (
    PrioritizedReplayBuffer,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)
from rl_buffers.traj_language import TrajectoryPredicate, traj
from rl_buffers.trajectory import Trajectory
from rl_buffers.trajectory_bounds import find_start_stop_traj
from rl_buffers.trajectory_query import DEFAULT_DONE_KEYS, filter_trajectories, iter_trajectories
from rl_buffers.utils import tree_iter
from rl_buffers.writers import (
    ImmutableDatasetWriter,
    RoundRobinWriter,
    TensorDictMaxValueWriter,
    TensorDictRoundRobinWriter,
)

__version__ = _version("rl-buffers")

__all__ = [
    "DEFAULT_DONE_KEYS",
    "CheckpointCorruptError",
    "CompressedListStorage",
    "ConsumingSampler",
    "D4RLExperienceReplay",
    "DatasetFormatError",
    "DatasetReplayBuffer",
    "DensifyReward",
    "FlatStorageCheckpointer",
    "H5StorageCheckpointer",
    "HERReplayBuffer",
    "HindsightStrategy",
    "ImmutableDatasetWriter",
    "LambdaScheduler",
    "LazyMemmapStorage",
    "LazyStackStorage",
    "LazyTensorStorage",
    "LinearScheduler",
    "ListStorage",
    "MinSegmentTree",
    "MinariExperienceReplay",
    "MultiStep",
    "NestedStorageCheckpointer",
    "NoSpaceError",
    "ParameterScheduler",
    "PrioritizedReplayBuffer",
    "PrioritizedSampler",
    "PrioritizedSliceSampler",
    "RandomSampler",
    "RemoteTensorDictReplayBuffer",
    "ReplayBuffer",
    "ReplayBufferEnsemble",
    "RoundRobinWriter",
    "SampleUnit",
    "Sampler",
    "SamplerWithoutReplacement",
    "SchedulerList",
    "Sequence",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
    "StalenessAwareSampler",
    "StepScheduler",
    "Storage",
    "StorageCheckpointerBase",
    "StorageMemoryError",
    "SumSegmentTree",
    "TensorDictMaxValueWriter",
    "TensorDictPrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
    "TensorDictRoundRobinWriter",
    "TensorStorage",
    "Trajectory",
    "TrajectoryPredicate",
    "Transition",
    "__version__",
    "filter_trajectories",
    "find_start_stop_traj",
    "iter_trajectories",
    "traj",
    "tree_iter",
]
