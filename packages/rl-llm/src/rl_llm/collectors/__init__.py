"""Collectors of dialog turns and the weight updates of the generating model."""

from rl_llm.collectors.async_llm_collector import AsyncLLMCollector
from rl_llm.collectors.llm_collector import LLMCollector
from rl_llm.collectors.weight_update import TransformersUpdater

__all__ = ["AsyncLLMCollector", "LLMCollector", "TransformersUpdater"]
