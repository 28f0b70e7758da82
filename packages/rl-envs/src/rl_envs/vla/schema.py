"""Where a vision-language-action (VLA) TensorDict keeps its entries (TorchRL's keys)."""

from __future__ import annotations

from tensordict.utils import NestedKey

from rl_envs.transforms.action_chunk import ACTION_CHUNK_KEY, ACTION_IS_PAD_KEY
from rl_envs.transforms.action_tokenizer import ACTION_TOKENS_KEY

__all__ = [
    "ACTION_CHUNK_KEY",
    "ACTION_IS_PAD_KEY",
    "ACTION_KEY",
    "ACTION_TOKENS_KEY",
    "IMAGE_KEY",
    "INSTRUCTION_KEY",
    "OBSERVATION_KEY",
    "STATE_KEY",
    "VLA_ACTION_KEY",
]

OBSERVATION_KEY: NestedKey = "observation"
IMAGE_KEY: NestedKey = ("observation", "image")
"""The main camera frame, ``uint8 [*B, C, H, W]``."""
STATE_KEY: NestedKey = ("observation", "state")
"""The proprioceptive state, ``[*B, state_dim]``."""
INSTRUCTION_KEY: NestedKey = "language_instruction"
"""The task in words (a non-tensor string per env)."""
ACTION_KEY: NestedKey = "action"
VLA_ACTION_KEY: NestedKey = "vla_action"
"""The root of a VLA policy's outputs: ``ACTION_CHUNK_KEY`` (the ``[*B, H, A]`` chunk of
continuous actions) and ``ACTION_TOKENS_KEY`` (their discrete token ids)."""
