"""Policy wrappers around language models and the containers they read and write."""

from rl_llm.modules.base import LLMWrapperBase
from rl_llm.modules.containers import ChatHistory, LogProbs, Masks, Text, Tokens
from rl_llm.modules.transformers_wrapper import TransformersWrapper
from rl_llm.modules.trl_interop import HFRewardModelWrapper, TorchRLBufferDataset

__all__ = [
    "ChatHistory",
    "HFRewardModelWrapper",
    "LLMWrapperBase",
    "LogProbs",
    "Masks",
    "Text",
    "Tokens",
    "TorchRLBufferDataset",
    "TransformersWrapper",
]
