"""Data collectors for the TensorDict RL toolkit: single-process, multiprocess sync/async, Ray."""

from importlib.metadata import version as _version

from rl_collectors._batching import BatchTimings
from rl_collectors._multi_base import MultiCollector, WorkerError, WorkerTimeoutError
from rl_collectors.cloudpickle_wrapper import CloudpickleWrapper
from rl_collectors.collector import Collector, SyncDataCollector
from rl_collectors.multi_async import (
    AsyncCollector,
    MultiAsyncCollector,
    MultiAsyncDataCollector,
    MultiaSyncDataCollector,
)
from rl_collectors.multi_sync import MultiSyncCollector, MultiSyncDataCollector
from rl_collectors.ray_collector import RayCollector
from rl_collectors.split import split_trajectories
from rl_collectors.weight_sync import (
    MultiProcessWeightSyncScheme,
    NoWeightSyncScheme,
    SharedMemWeightSyncScheme,
    WeightSyncScheme,
)

__version__ = _version("rl-collectors")

__all__ = [
    "AsyncCollector",
    "BatchTimings",
    "CloudpickleWrapper",
    "Collector",
    "MultiAsyncCollector",
    "MultiAsyncDataCollector",
    "MultiCollector",
    "MultiProcessWeightSyncScheme",
    "MultiSyncCollector",
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "NoWeightSyncScheme",
    "RayCollector",
    "SharedMemWeightSyncScheme",
    "SyncDataCollector",
    "WeightSyncScheme",
    "WorkerError",
    "WorkerTimeoutError",
    "__version__",
    "split_trajectories",
]
