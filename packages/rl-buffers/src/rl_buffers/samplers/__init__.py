"""Samplers: which stored items a batch reads."""

from rl_buffers.samplers.base import Sampler
from rl_buffers.samplers.consuming import ConsumingSampler
from rl_buffers.samplers.prioritized import PrioritizedSampler
from rl_buffers.samplers.prioritized_slice import PrioritizedSliceSampler
from rl_buffers.samplers.random import RandomSampler, SamplerWithoutReplacement
from rl_buffers.samplers.slice import SliceSampler, SliceSamplerWithoutReplacement
from rl_buffers.samplers.staleness import StalenessAwareSampler

__all__ = [
    "ConsumingSampler",
    "PrioritizedSampler",
    "PrioritizedSliceSampler",
    "RandomSampler",
    "Sampler",
    "SamplerWithoutReplacement",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
    "StalenessAwareSampler",
]
