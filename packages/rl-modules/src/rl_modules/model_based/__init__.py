"""Model-based modules: Dreamer's RSSM (Gaussian v1 and DreamerV3's discrete latents),
pixel encoder/decoder, world model and world-model wrapper, actor, continuation head, symlog/symexp and two-hot heads."""

from rl_modules.model_based.conv import ObsDecoder, ObsEncoder
from rl_modules.model_based.functional import (
    default_bins,
    straight_through_categorical,
    symexp,
    symlog,
    two_hot_cross_entropy,
    two_hot_decode,
    two_hot_encode,
    unimix_probs,
)
from rl_modules.model_based.heads import ContinuationHead, DreamerActor, SymExpTwoHot
from rl_modules.model_based.rollout import RSSMRollout, RSSMRolloutV3
from rl_modules.model_based.rssm import RSSMPosterior, RSSMPrior
from rl_modules.model_based.rssm_v3 import RSSMPosteriorV3, RSSMPriorV3
from rl_modules.model_based.world_model import WorldModel
from rl_modules.model_based.wrapper import WorldModelWrapper

__all__ = [
    "ContinuationHead",
    "DreamerActor",
    "ObsDecoder",
    "ObsEncoder",
    "RSSMPosterior",
    "RSSMPosteriorV3",
    "RSSMPrior",
    "RSSMPriorV3",
    "RSSMRollout",
    "RSSMRolloutV3",
    "SymExpTwoHot",
    "WorldModel",
    "WorldModelWrapper",
    "default_bins",
    "straight_through_categorical",
    "symexp",
    "symlog",
    "two_hot_cross_entropy",
    "two_hot_decode",
    "two_hot_encode",
    "unimix_probs",
]
