"""Actors, critics and Q-value heads (TensorDict modules)."""

from rl_modules.actors.actor_critic import (
    ActorCriticOperator,
    ActorCriticWrapper,
    ActorValueOperator,
)
from rl_modules.actors.common import Actor, SafeModule, ValueOperator
from rl_modules.actors.probabilistic import ProbabilisticActor
from rl_modules.actors.qvalue import (
    DistributionalQValueActor,
    DistributionalQValueModule,
    QValueActor,
    QValueModule,
)

__all__ = [
    "Actor",
    "ActorCriticOperator",
    "ActorCriticWrapper",
    "ActorValueOperator",
    "DistributionalQValueActor",
    "DistributionalQValueModule",
    "ProbabilisticActor",
    "QValueActor",
    "QValueModule",
    "SafeModule",
    "ValueOperator",
]
