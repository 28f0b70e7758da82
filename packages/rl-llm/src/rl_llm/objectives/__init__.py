"""LLM losses: GRPO (with Dr. GRPO and DAPO variants), group-relative advantages, SFT."""

from rl_llm.objectives.distillation import DistillationLoss, DistillationLossOutput
from rl_llm.objectives.functional import (
    aggregate,
    clipped_surrogate,
    group_relative_advantage,
    k3_kl_token_estimate,
    kl_k3,
)
from rl_llm.objectives.grpo import GRPOLoss, GRPOLossOutput
from rl_llm.objectives.mc_advantage import MCAdvantage
from rl_llm.objectives.mc_selector import MCAdvantageSelector
from rl_llm.objectives.sft import SFTLoss, SFTLossOutput

__all__ = [
    "DistillationLoss",
    "DistillationLossOutput",
    "GRPOLoss",
    "GRPOLossOutput",
    "MCAdvantage",
    "MCAdvantageSelector",
    "SFTLoss",
    "SFTLossOutput",
    "aggregate",
    "clipped_surrogate",
    "group_relative_advantage",
    "k3_kl_token_estimate",
    "kl_k3",
]
