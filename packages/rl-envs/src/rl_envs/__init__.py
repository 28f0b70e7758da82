"""Environments for the TensorDict RL toolkit: specs, EnvBase, Gymnasium / DM Control / MuJoCo / pure-torch envs, transforms, batched envs."""

from importlib.metadata import version as _version

from rl_envs.specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    OneHot,
    TensorSpec,
    Unbounded,
)

__version__ = _version("rl-envs")

__all__ = [
    # specs
    "Binary",
    "Bounded",
    "Categorical",
    "Composite",
    "OneHot",
    "TensorSpec",
    "Unbounded",
    "__version__",
]
