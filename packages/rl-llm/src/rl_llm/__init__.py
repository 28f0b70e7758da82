"""LLM post-training for the TensorDict RL toolkit: chat history, transformers policies, chat envs, GRPO / SFT losses."""

from importlib.metadata import version as _version

__version__ = _version("rl-llm")

__all__ = ["__version__"]
