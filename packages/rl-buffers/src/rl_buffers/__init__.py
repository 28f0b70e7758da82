"""Replay buffers for the TensorDict RL toolkit: storages, samplers, writers, prioritized replay (C++/CUDA extension with a torch fallback), HER."""

from importlib.metadata import version as _version

__version__ = _version("rl-buffers")

__all__ = ["__version__"]
