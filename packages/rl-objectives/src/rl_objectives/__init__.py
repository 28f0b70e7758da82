"""Losses and value estimators for the TensorDict RL toolkit: DQN, DDPG, TD3, SAC, PPO, A2C, REINFORCE, GAE, TD(lambda), V-trace."""

from importlib.metadata import version as _version

__version__ = _version("rl-objectives")

__all__ = ["__version__"]
