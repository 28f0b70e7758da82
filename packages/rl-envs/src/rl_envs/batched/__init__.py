"""Batched envs: ``SerialEnv`` (in process) and ``ParallelEnv`` (worker processes, shared memory)."""

from rl_envs.batched.parallel import ParallelEnv, WorkerError
from rl_envs.batched.serial import SerialEnv

__all__ = ["ParallelEnv", "SerialEnv", "WorkerError"]
