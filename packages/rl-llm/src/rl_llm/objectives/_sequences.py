"""Reading sequences (ragged or padded) from a TensorDict as dense ``[B, L]`` tensors."""

from __future__ import annotations

from typing import Any, Literal

import torch
from tensordict import NestedKey, TensorDictBase

from rl_llm.data.history import History
from rl_llm.modules.base import pad_right

MaskingStrategy = Literal["sft", "rlhf", "generic"]


def get_dense(
    td: TensorDictBase, key: NestedKey, padding_value: float | int | bool
) -> torch.Tensor:
    """``td[key]`` as one tensor: dense entries as they are, ragged rows right-padded."""
    value = td.get(
        key, None, as_padded_tensor=True, padding_side="right", padding_value=padding_value
    )
    if value is None:
        raise KeyError(
            f"Missing entry {key!r}; keys present: {sorted(map(str, td.keys(True, True)))}."
        )
    return value


def prompt_lengths(td: TensorDictBase, prompt_key: NestedKey, full: torch.Tensor) -> torch.Tensor:
    """Where each row's response starts in ``full``: the prompt's length (ragged) or width (padded)."""
    try:
        prompt = td.get(prompt_key, None)
    except RuntimeError:  # ragged rows
        prompt = td.get(prompt_key, as_list=True)
    if prompt is None:
        raise KeyError(
            f"masking_strategy='sft' needs the prompt tokens at {prompt_key!r} to find where responses start."
        )
    if isinstance(prompt, torch.Tensor):  # dense: every response starts at the prompt width
        return torch.full((full.shape[0],), prompt.shape[-1], device=full.device)
    return torch.tensor([p.numel() for p in prompt], device=full.device)


def token_mask(
    td: TensorDictBase,
    strategy: MaskingStrategy,
    full: torch.Tensor,
    attention: torch.Tensor,
    *,
    prompt_key: NestedKey,
    assistant_key: NestedKey,
) -> torch.Tensor:
    """The tokens a loss trains on.

    ``"sft"``: the response (tokens after the prompt); ``"rlhf"``: every token the
    assistant produced (``masks.all_assistant_mask``, e.g. all assistant turns of a
    rendered history); ``"generic"``: every real token but each row's first.
    """
    if strategy == "sft":
        start = prompt_lengths(td, prompt_key, full)
        position = torch.arange(full.shape[-1], device=full.device)
        return attention & (position >= start[:, None])
    if strategy == "rlhf":
        return get_dense(td, assistant_key, False).bool() & attention
    if strategy == "generic":
        first = attention.long().cumsum(-1) == 1
        return attention & ~first
    raise ValueError(f"masking_strategy must be 'sft', 'rlhf' or 'generic', got {strategy!r}.")


def render_history(actor: Any, history: History) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Renders conversations with ``actor``'s tokenizer and chat template.

    Returns right-padded token ids, attention and assistant masks, each ``[B, L]``.
    """
    rows = [
        history[i].apply_chat_template(
            tokenizer=actor.tokenizer,
            add_generation_prompt=False,
            chat_template=actor.chat_template,
            chat_template_name=actor.chat_template_name,
            return_assistant_tokens_mask=True,
        )
        for i in range(history.batch_size[0])
    ]
    tokens, attention = pad_right([r["input_ids"] for r in rows], actor.pad_token_id)
    assistant, _ = pad_right([r["assistant_masks"].bool() for r in rows], False)
    return tokens, attention, assistant
