"""The containers a policy wrapper reads and writes: prompt / response / full views of one exchange.

Each container groups the three views of a turn under one key, as in TorchRL:
``td["history"]`` is a :class:`ChatHistory`, ``td["text"]`` a :class:`Text`,
``td["tokens"]`` a :class:`Tokens`, ``td["log_probs"]`` a :class:`LogProbs` and
``td["masks"]`` a :class:`Masks`. ``full`` is always ``prompt`` followed by
``response``; ``log_probs.full[t]`` is the log-probability of ``tokens.full[t]``
given the tokens before it (0 on prompt and padding positions).

Layouts: with ``padded=False`` (default) each batch element holds 1-d tensors of
its own length (the TensorDict is lazily stacked, read it with
``td.get(key, as_padded_tensor=True)``). With ``padded=True`` tensors are dense:
``tokens.prompt`` is left-padded to ``[B, P]``, ``tokens.response`` right-padded to
``[B, R]``, and ``tokens.full`` is their concatenation ``[B, P + R]``, so the
response starts at column ``P`` in every row; ``masks.all_attention_mask`` tells
real tokens from padding.
"""

from __future__ import annotations

import torch
from tensordict import TensorClass

from rl_llm.data.history import History


class ChatHistory(TensorClass["nocast"]):
    """Conversations before (``prompt``), produced by (``response``) and after (``full``) a policy call.

    Examples:
        >>> h = History.from_chats([{"role": "user", "content": "1+1="}])
        >>> ChatHistory(prompt=h).prompt.role
        ['user']
    """

    prompt: History | None = None
    response: History | None = None
    full: History | None = None


class Text(TensorClass["nocast"]):
    """Rendered text of the prompt, the response and both (``full = prompt + response``)."""

    prompt: str | None = None
    response: str | None = None
    full: str | None = None


class Tokens(TensorClass["nocast"]):
    """Token ids of the prompt, the response and both; ``padded`` tells the layout."""

    prompt: torch.Tensor | None = None
    response: torch.Tensor | None = None
    full: torch.Tensor | None = None
    padded: bool | None = None


class LogProbs(TensorClass["nocast"]):
    """Per-token log-probabilities aligned with :class:`Tokens` (prompt positions hold 0 in ``full``)."""

    prompt: torch.Tensor | None = None
    response: torch.Tensor | None = None
    full: torch.Tensor | None = None
    padded: bool | None = None


class Masks(TensorClass["nocast"]):
    """Masks over ``tokens.full``: real tokens (attention) and tokens the assistant produced."""

    all_attention_mask: torch.Tensor | None = None
    all_assistant_mask: torch.Tensor | None = None
    padded: bool | None = None
