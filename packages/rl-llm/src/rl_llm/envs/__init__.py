"""Chat envs: conversations as observations, replies as actions."""

from rl_llm.envs.chat import ChatEnv
from rl_llm.envs.dataset_chat import DatasetChatEnv
from rl_llm.envs.transform import LLMTransform

__all__ = ["ChatEnv", "DatasetChatEnv", "LLMTransform"]
