"""LLM post-training for the TensorDict RL toolkit: chat history, transformers policies, chat envs, GRPO / SFT losses."""

from importlib.metadata import version as _version

from rl_llm.collectors import AsyncLLMCollector, LLMCollector, TransformersUpdater
from rl_llm.data import CHATML_TEMPLATE, History, add_chat_template, make_arithmetic_problems
from rl_llm.envs import ChatEnv, DatasetChatEnv, LLMTransform
from rl_llm.modules import (
    ChatHistory,
    HFRewardModelWrapper,
    LLMWrapperBase,
    LogProbs,
    Masks,
    Text,
    Tokens,
    TorchRLBufferDataset,
    TransformersWrapper,
)
from rl_llm.objectives import (
    DistillationLoss,
    DistillationLossOutput,
    GRPOLoss,
    GRPOLossOutput,
    MCAdvantage,
    MCAdvantageSelector,
    SFTLoss,
    SFTLossOutput,
    k3_kl_token_estimate,
)
from rl_llm.sandbox import PythonSandbox, SandboxResult
from rl_llm.transforms import (
    AnswerRewardParser,
    FormatReward,
    JSONCallParser,
    KLRewardTransform,
    PolicyVersion,
    PythonInterpreter,
    ToolCall,
    ToolRegistry,
    XMLBlockParser,
    extract_answer,
    normalize_answer,
)

__version__ = _version("rl-llm")

__all__ = [
    "CHATML_TEMPLATE",
    "AnswerRewardParser",
    "AsyncLLMCollector",
    "ChatEnv",
    "ChatHistory",
    "DatasetChatEnv",
    "DistillationLoss",
    "DistillationLossOutput",
    "FormatReward",
    "GRPOLoss",
    "GRPOLossOutput",
    "HFRewardModelWrapper",
    "History",
    "JSONCallParser",
    "KLRewardTransform",
    "LLMCollector",
    "LLMTransform",
    "LLMWrapperBase",
    "LogProbs",
    "MCAdvantage",
    "MCAdvantageSelector",
    "Masks",
    "PolicyVersion",
    "PythonInterpreter",
    "PythonSandbox",
    "SFTLoss",
    "SFTLossOutput",
    "SandboxResult",
    "Text",
    "Tokens",
    "ToolCall",
    "ToolRegistry",
    "TorchRLBufferDataset",
    "TransformersUpdater",
    "TransformersWrapper",
    "XMLBlockParser",
    "__version__",
    "add_chat_template",
    "extract_answer",
    "k3_kl_token_estimate",
    "make_arithmetic_problems",
    "normalize_answer",
]
