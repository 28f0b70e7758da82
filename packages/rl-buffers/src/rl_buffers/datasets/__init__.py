"""Offline datasets as replay buffers: D4RL HDF5 files, local Minari datasets, plain arrays."""

from rl_buffers.datasets._buffer import DatasetReplayBuffer
from rl_buffers.datasets.d4rl import D4RLExperienceReplay, read_d4rl_hdf5, write_d4rl_hdf5
from rl_buffers.datasets.minari_data import (
    MinariExperienceReplay,
    load_minari_transitions,
    write_minari_dataset,
)
from rl_buffers.datasets.transitions import (
    DatasetFormatError,
    check_matches_env,
    transitions_from_arrays,
)

__all__ = [
    "D4RLExperienceReplay",
    "DatasetFormatError",
    "DatasetReplayBuffer",
    "MinariExperienceReplay",
    "check_matches_env",
    "load_minari_transitions",
    "read_d4rl_hdf5",
    "transitions_from_arrays",
    "write_d4rl_hdf5",
    "write_minari_dataset",
]
