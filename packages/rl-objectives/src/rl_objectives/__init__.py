"""Losses and value estimators for the TensorDict RL toolkit: DQN, DDPG, TD3, SAC, PPO, A2C, REINFORCE, MAPPO / IPPO / QMIX, GAE, TD(lambda), V-trace."""

from importlib.metadata import version as _version

from rl_objectives.a2c import A2CLoss
from rl_objectives.act import ACTLoss
from rl_objectives.bc import BCLoss
from rl_objectives.common import AUTO_LOSS_MASK_KEYS, LossModule
from rl_objectives.cql import CQLLoss, DiscreteCQLLoss
from rl_objectives.crossq import CrossQLoss
from rl_objectives.ddpg import DDPGLoss
from rl_objectives.decision_transformer import DTLoss, OnlineDTLoss
from rl_objectives.discrete_sac import DiscreteSACLoss
from rl_objectives.dqn import DistributionalDQNLoss, DQNLoss
from rl_objectives.gail import GAILLoss
from rl_objectives.iql import DiscreteIQLLoss, IQLLoss
from rl_objectives.multiagent import IPPOLoss, MAPPOLoss, QMixerLoss
from rl_objectives.ppo import ClipPPOLoss, KLPENPPOLoss, PPOLoss
from rl_objectives.redq import REDQLoss
from rl_objectives.reinforce import ReinforceLoss
from rl_objectives.sac import SACLoss
from rl_objectives.td3 import TD3Loss
from rl_objectives.td3_bc import TD3BCLoss
from rl_objectives.utils import HardUpdate, SoftUpdate, TargetNetUpdater, distance_loss
from rl_objectives.value import (
    GAE,
    MultiAgentGAE,
    TD0Estimator,
    TD1Estimator,
    TDLambdaEstimator,
    ValueEstimators,
    VTrace,
    build_value_estimator,
    register_value_estimator,
)

__version__ = _version("rl-objectives")

__all__ = [
    "AUTO_LOSS_MASK_KEYS",
    "GAE",
    "A2CLoss",
    "ACTLoss",
    "BCLoss",
    "CQLLoss",
    "ClipPPOLoss",
    "CrossQLoss",
    "DDPGLoss",
    "DQNLoss",
    "DTLoss",
    "DiscreteCQLLoss",
    "DiscreteIQLLoss",
    "DiscreteSACLoss",
    "DistributionalDQNLoss",
    "GAILLoss",
    "HardUpdate",
    "IPPOLoss",
    "IQLLoss",
    "KLPENPPOLoss",
    "LossModule",
    "MAPPOLoss",
    "MultiAgentGAE",
    "OnlineDTLoss",
    "PPOLoss",
    "QMixerLoss",
    "REDQLoss",
    "ReinforceLoss",
    "SACLoss",
    "SoftUpdate",
    "TD0Estimator",
    "TD1Estimator",
    "TD3BCLoss",
    "TD3Loss",
    "TDLambdaEstimator",
    "TargetNetUpdater",
    "VTrace",
    "ValueEstimators",
    "__version__",
    "build_value_estimator",
    "distance_loss",
    "register_value_estimator",
]

# Model-based RL: Dreamer (v1) and DreamerV3.
from rl_objectives._dreamer_common import (
    symexp,
    symlog,
    two_hot_cross_entropy,
    two_hot_decode,
    two_hot_encode,
)
from rl_objectives.dreamer import DreamerActorLoss, DreamerModelLoss, DreamerValueLoss
from rl_objectives.dreamer_v3 import (
    DreamerV3ActorLoss,
    DreamerV3ModelLoss,
    DreamerV3ValueLoss,
    categorical_kl_balanced,
    categorical_kl_terms,
)

__all__ += [
    "DreamerActorLoss",
    "DreamerModelLoss",
    "DreamerV3ActorLoss",
    "DreamerV3ModelLoss",
    "DreamerV3ValueLoss",
    "DreamerValueLoss",
    "categorical_kl_balanced",
    "categorical_kl_terms",
    "symexp",
    "symlog",
    "two_hot_cross_entropy",
    "two_hot_decode",
    "two_hot_encode",
]
