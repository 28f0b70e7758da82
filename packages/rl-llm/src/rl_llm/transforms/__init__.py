"""Transforms for chat envs: tools, verifiable rewards, KL penalties, policy versions."""

from rl_llm.transforms.kl import KLRewardTransform
from rl_llm.transforms.policy_version import PolicyVersion
from rl_llm.transforms.reward import (
    AnswerRewardParser,
    FormatReward,
    extract_answer,
    normalize_answer,
)
from rl_llm.transforms.tool_calls import (
    JSONCallParser,
    ParseResult,
    ToolCall,
    ToolRegistry,
    XMLBlockParser,
)
from rl_llm.transforms.tools import PythonInterpreter, extract_python_code

__all__ = [
    "AnswerRewardParser",
    "FormatReward",
    "JSONCallParser",
    "KLRewardTransform",
    "ParseResult",
    "PolicyVersion",
    "PythonInterpreter",
    "ToolCall",
    "ToolRegistry",
    "XMLBlockParser",
    "extract_answer",
    "extract_python_code",
    "normalize_answer",
]
