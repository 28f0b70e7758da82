"""LLM post-training for the TensorDict RL toolkit: chat history, transformers policies, chat envs, GRPO / SFT losses."""

from importlib.metadata import version as _version

from rl_llm.data import CHATML_TEMPLATE, History, add_chat_template, make_arithmetic_problems
from rl_llm.modules import (
    ChatHistory,
    LLMWrapperBase,
    LogProbs,
    Masks,
    Text,
    Tokens,
    TransformersWrapper,
)
from rl_llm.objectives import GRPOLoss, GRPOLossOutput, MCAdvantage, SFTLoss, SFTLossOutput

__version__ = _version("rl-llm")

__all__ = [
    "CHATML_TEMPLATE",
    "ChatHistory",
    "GRPOLoss",
    "GRPOLossOutput",
    "History",
    "LLMWrapperBase",
    "LogProbs",
    "MCAdvantage",
    "Masks",
    "SFTLoss",
    "SFTLossOutput",
    "Text",
    "Tokens",
    "TransformersWrapper",
    "__version__",
    "add_chat_template",
    "make_arithmetic_problems",
]
