"""Multi-agent losses: MAPPO, IPPO and QMIX / VDN (TorchRL's ``torchrl.objectives.multiagent``)."""

from rl_objectives.multiagent.mappo import IPPOLoss, MAPPOLoss
from rl_objectives.multiagent.qmixer import QMixerLoss

__all__ = ["IPPOLoss", "MAPPOLoss", "QMixerLoss"]
