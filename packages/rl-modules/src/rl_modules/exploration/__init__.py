"""Exploration modules, applied after a policy."""

from rl_modules.exploration.egreedy import EGreedyModule
from rl_modules.exploration.gaussian import AdditiveGaussianModule
from rl_modules.exploration.ornstein_uhlenbeck import OrnsteinUhlenbeckProcessModule

__all__ = ["AdditiveGaussianModule", "EGreedyModule", "OrnsteinUhlenbeckProcessModule"]
