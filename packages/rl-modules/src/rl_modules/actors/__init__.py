"""Actors, critics and Q-value heads (TensorDict modules)."""

from rl_modules.actors.actor_critic import (
    ActorCriticOperator,
    ActorCriticWrapper,
    ActorValueOperator,
)
from rl_modules.actors.common import Actor, SafeModule, ValueOperator
from rl_modules.actors.compat import ensure_tensordict_compatible, is_tensordict_compatible
from rl_modules.actors.diffusion import DDPMSampler, DiffusionActor
from rl_modules.actors.lm_head import LMHeadActorValueOperator
from rl_modules.actors.multi_step import MultiStepActorWrapper
from rl_modules.actors.probabilistic import ProbabilisticActor
from rl_modules.actors.qvalue import (
    DistributionalQValueActor,
    DistributionalQValueModule,
    QValueActor,
    QValueModule,
)
from rl_modules.actors.qvalue_hooks import DistributionalQValueHook, QValueHook
from rl_modules.actors.safe import (
    SafeProbabilisticModule,
    SafeProbabilisticTensorDictSequential,
    SafeSequential,
)
from rl_modules.actors.tanh import TanhModule
from rl_modules.actors.vmap import VmapModule

__all__ = [
    "Actor",
    "ActorCriticOperator",
    "ActorCriticWrapper",
    "ActorValueOperator",
    "DDPMSampler",
    "DiffusionActor",
    "DistributionalQValueActor",
    "DistributionalQValueHook",
    "DistributionalQValueModule",
    "LMHeadActorValueOperator",
    "MultiStepActorWrapper",
    "ProbabilisticActor",
    "QValueActor",
    "QValueHook",
    "QValueModule",
    "SafeModule",
    "SafeProbabilisticModule",
    "SafeProbabilisticTensorDictSequential",
    "SafeSequential",
    "TanhModule",
    "ValueOperator",
    "VmapModule",
    "ensure_tensordict_compatible",
    "is_tensordict_compatible",
]
