"""Exploration modules, applied after a policy."""

from rl_modules.exploration.consistent_dropout import ConsistentDropout, ConsistentDropoutModule
from rl_modules.exploration.egreedy import EGreedyModule
from rl_modules.exploration.gaussian import AdditiveGaussianModule
from rl_modules.exploration.gsde import LazygSDEModule, gSDEModule
from rl_modules.exploration.ornstein_uhlenbeck import OrnsteinUhlenbeckProcessModule
from rl_modules.exploration.random_policy import RandomPolicy
from rl_modules.exploration.spec_from_env import set_exploration_modules_spec_from_env

__all__ = [
    "AdditiveGaussianModule",
    "ConsistentDropout",
    "ConsistentDropoutModule",
    "EGreedyModule",
    "LazygSDEModule",
    "OrnsteinUhlenbeckProcessModule",
    "RandomPolicy",
    "gSDEModule",
    "set_exploration_modules_spec_from_env",
]
