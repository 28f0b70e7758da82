"""Policy and value modules for the TensorDict RL toolkit: networks, distributions, actors, critics, exploration, recurrent and multi-agent modules."""

from importlib.metadata import version as _version

__version__ = _version("rl-modules")

__all__ = ["__version__"]
