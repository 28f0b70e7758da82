"""Exploration type = tensordict's interaction type (aliases, TorchRL's names).

``ExplorationType.RANDOM`` samples from a policy's distribution;
``DETERMINISTIC`` / ``MODE`` / ``MEAN`` take its deterministic sample, mode or
mean. ``set_exploration_type(...)`` is a context manager (and decorator);
``exploration_type()`` reads the current one (``None`` outside any block).

Examples:
    >>> from rl_modules import ExplorationType, set_exploration_type, exploration_type
    >>> with set_exploration_type(ExplorationType.MODE):
    ...     exploration_type() is ExplorationType.MODE
    True
"""

from __future__ import annotations

from tensordict.nn import InteractionType as ExplorationType
from tensordict.nn import set_interaction_type as set_exploration_type
from tensordict.nn.probabilistic import interaction_type as exploration_type

__all__ = ["ExplorationType", "exploration_type", "set_exploration_type"]
