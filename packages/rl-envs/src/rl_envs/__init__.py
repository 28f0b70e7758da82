"""Environments for the TensorDict RL toolkit: specs, EnvBase, Gymnasium / DM Control / MuJoCo / pure-torch envs, transforms, batched envs."""

from importlib.metadata import version as _version

__version__ = _version("rl-envs")

__all__ = ["__version__"]
