"""Sequence models for control: Decision Transformer (and its actors, inference wrapper) and ACT."""

from rl_modules.sequence.act import ACTModel
from rl_modules.sequence.decision_transformer import DecisionTransformer, DTActor, OnlineDTActor
from rl_modules.sequence.dt_inference import DecisionTransformerInferenceWrapper

__all__ = [
    "ACTModel",
    "DTActor",
    "DecisionTransformer",
    "DecisionTransformerInferenceWrapper",
    "OnlineDTActor",
]
