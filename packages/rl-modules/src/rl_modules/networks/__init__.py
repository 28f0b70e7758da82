"""Plain ``nn.Module`` networks (wrap them in a TensorDictModule to route keys)."""

from rl_modules.networks.batchrenorm import BatchRenorm1d
from rl_modules.networks.conv import Conv3dNet, ConvNet, SquashDims
from rl_modules.networks.cross_group_critic import CrossCriticGroupSpec, CrossGroupCritic
from rl_modules.networks.dqn import DdpgMlpActor, DdpgMlpQNet, DuelingCnnDQNet
from rl_modules.networks.ensemble import Ensemble, StackedParams
from rl_modules.networks.mixers import Mixer, QMixer, VDNMixer
from rl_modules.networks.mlp import MLP
from rl_modules.networks.multiagent import MultiAgentConvNet, MultiAgentMLP, MultiAgentNetBase
from rl_modules.networks.noisy import NoisyLazyLinear, NoisyLinear, reset_noise

__all__ = [
    "MLP",
    "BatchRenorm1d",
    "Conv3dNet",
    "ConvNet",
    "CrossCriticGroupSpec",
    "CrossGroupCritic",
    "DdpgMlpActor",
    "DdpgMlpQNet",
    "DuelingCnnDQNet",
    "Ensemble",
    "Mixer",
    "MultiAgentConvNet",
    "MultiAgentMLP",
    "MultiAgentNetBase",
    "NoisyLazyLinear",
    "NoisyLinear",
    "QMixer",
    "SquashDims",
    "StackedParams",
    "VDNMixer",
    "reset_noise",
]
