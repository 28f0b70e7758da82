"""Data collectors for the TensorDict RL toolkit: single-process, multiprocess sync/async, Ray."""

from importlib.metadata import version as _version

__version__ = _version("rl-collectors")

__all__ = ["__version__"]
