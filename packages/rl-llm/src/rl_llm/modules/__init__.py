"""Policy wrappers around language models and the containers they read and write."""

from rl_llm.modules.base import LLMWrapperBase
from rl_llm.modules.containers import ChatHistory, LogProbs, Masks, Text, Tokens
from rl_llm.modules.transformers_wrapper import TransformersWrapper

__all__ = [
    "ChatHistory",
    "LLMWrapperBase",
    "LogProbs",
    "Masks",
    "Text",
    "Tokens",
    "TransformersWrapper",
]
