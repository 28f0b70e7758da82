"""Policy wrappers around language models and the containers they read and write."""

from rl_llm.modules.containers import ChatHistory, LogProbs, Masks, Text, Tokens

__all__ = ["ChatHistory", "LogProbs", "Masks", "Text", "Tokens"]
