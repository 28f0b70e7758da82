"""Triton kernels for the TensorDict RL toolkit (advantage scans, recurrent cells) with exact torch fallbacks."""

from importlib.metadata import version as _version

__version__ = _version("rl-kernels")

__all__ = ["__version__"]
