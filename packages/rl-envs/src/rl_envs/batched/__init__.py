"""Batched envs: ``SerialEnv`` (in process), ``ParallelEnv`` (worker processes, shared memory)
and ``AsyncEnvPool`` (one worker thread or process per env, stepped asynchronously)."""

from rl_envs.batched.async_pool import AsyncEnvPool
from rl_envs.batched.parallel import ParallelEnv, WorkerError, WorkerTimeoutError
from rl_envs.batched.serial import SerialEnv

__all__ = ["AsyncEnvPool", "ParallelEnv", "SerialEnv", "WorkerError", "WorkerTimeoutError"]
