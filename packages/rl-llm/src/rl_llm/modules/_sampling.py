"""Incremental decoding with the model's KV cache: the fast sampling path of ``TransformersWrapper``.

``transformers``' ``generate`` rebuilds its logits processors, stopping criteria and
cache bookkeeping on every call; for small models and short replies that overhead,
not the model, is most of the time. :func:`decode` is the plain loop: one forward over
the prompts (each distinct prompt once: GRPO groups repeat a prompt ``group_size``
times, so their shared prefix is computed once and the cache rows are copied), then one
forward per new token on the cached keys and values.
"""

from __future__ import annotations

from typing import Any

import torch

SUPPORTED_KWARGS = frozenset({"max_new_tokens", "do_sample", "temperature", "top_k", "top_p"})


def warp_logits(
    logits: torch.Tensor, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0
) -> torch.Tensor:
    """Temperature, then top-k, then top-p (nucleus) filtering of ``[B, V]`` logits.

    Filtered entries become ``-inf``; at least one token always survives. The order and
    the top-p rule (drop the tokens whose ascending cumulative probability is at most
    ``1 - top_p``) are those of ``transformers``' logits warpers.

    Args:
        logits: ``[B, V]`` next-token logits.
        temperature: divides the logits (``> 0``).
        top_k: keep the ``top_k`` largest logits; ``0`` keeps all.
        top_p: keep the smallest set of tokens whose probability reaches ``top_p``; ``1`` keeps all.

    Returns:
        The warped ``[B, V]`` logits.

    Examples:
        >>> warp_logits(torch.tensor([[0.0, 1.0, 2.0]]), top_k=2)
        tensor([[-inf, 1., 2.]])
    """
    if temperature != 1.0:
        logits = logits / temperature
    if 0 < top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        drop_sorted = cumulative <= 1 - top_p
        drop_sorted[..., -1] = False
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def check_sampling_kwargs(kwargs: dict[str, Any]) -> None:
    """Raises a ``ValueError`` naming the ``generate_kwargs`` :func:`decode` does not implement."""
    unsupported = sorted(set(kwargs) - SUPPORTED_KWARGS)
    if unsupported:
        raise ValueError(
            f"decoder='cache' implements {sorted(SUPPORTED_KWARGS)}, not {unsupported}; "
            "use decoder='generate' (transformers' generate) or decoder='auto' for those."
        )
    if not kwargs.get("max_new_tokens", 1) >= 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {kwargs['max_new_tokens']}.")
    temperature = kwargs.get("temperature", 1.0)
    if kwargs.get("do_sample", True) and not temperature > 0:
        raise ValueError(f"temperature must be > 0 when sampling, got {temperature}.")
    if not 0.0 < kwargs.get("top_p", 1.0) <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {kwargs['top_p']}.")
    if kwargs.get("top_k", 0) < 0:
        raise ValueError(f"top_k must be >= 0 (0 keeps every token), got {kwargs['top_k']}.")


@torch.no_grad()
def decode(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    eos_token_id: int,
    pad_token_id: int,
    max_new_tokens: int,
    do_sample: bool = True,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Samples replies to left-padded prompts with the model's KV cache.

    Args:
        model: a ``transformers`` causal LM (``forward`` with ``past_key_values``,
            ``position_ids`` and ``logits_to_keep``).
        input_ids: ``[B, W]`` left-padded prompt ids.
        attention_mask: ``[B, W]``, 1 on real tokens.
        eos_token_id: a row stops after sampling it.
        pad_token_id: fills a row after its eos.
        max_new_tokens: reply budget.
        do_sample: sample (``True``) or take the argmax (greedy).
        temperature, top_k, top_p: sampling settings (see :func:`warp_logits`).

    Returns:
        ``[B, N]`` reply ids (``N <= max_new_tokens``: the loop stops when every row has
        ended; pad after a row's eos) and ``[B, N]`` log-probabilities of those tokens under
        the model's unmodified distribution (temperature 1, no filtering).

    Examples:
        >>> from rl_llm.tiny import tiny_causal_lm, tiny_tokenizer
        >>> tok = tiny_tokenizer()
        >>> ids = torch.tensor([tok("1+1=")["input_ids"]])
        >>> replies, lps = decode(tiny_causal_lm(tok), ids, torch.ones_like(ids), eos_token_id=tok.eos_token_id,
        ...                       pad_token_id=tok.pad_token_id, max_new_tokens=3, do_sample=False)
        >>> replies.shape == lps.shape
        True
    """
    batch = input_ids.shape[0]
    attention_mask = attention_mask.long()
    # each distinct prompt is encoded once, its cache rows are then copied to its repeats
    unique, inverse = torch.unique(
        torch.cat([input_ids, attention_mask], -1), dim=0, return_inverse=True
    )
    width = input_ids.shape[1]
    u_ids, u_mask = unique[:, :width], unique[:, width:]
    position_ids = (u_mask.cumsum(-1) - 1).clamp_min(0)
    out = model(
        input_ids=u_ids,
        attention_mask=u_mask,
        position_ids=position_ids,
        use_cache=True,
        logits_to_keep=1,
    )
    cache = out.past_key_values
    logits = out.logits[:, -1]
    # unique rows come sorted: map them back to the batch order even when none repeats
    cache.batch_select_indices(inverse)
    logits = logits[inverse]
    next_position = (attention_mask.sum(-1, keepdim=True)).clamp_min(1)
    tokens, log_probs = [], []
    done = torch.zeros(batch, dtype=torch.bool, device=input_ids.device)
    for step in range(max_new_tokens):
        logits = logits.float()
        if do_sample:
            warped = warp_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p)
            token = torch.multinomial(warped.softmax(-1), 1).squeeze(-1)
        else:
            token = logits.argmax(-1)
        token = token.masked_fill(done, pad_token_id)
        tokens.append(token)
        log_probs.append(logits.log_softmax(-1).gather(-1, token.unsqueeze(-1)).squeeze(-1))
        done = done | (token == eos_token_id)
        if step + 1 == max_new_tokens or bool(done.all()):
            break
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones(batch, 1)], -1)
        out = model(
            input_ids=token.unsqueeze(-1),
            attention_mask=attention_mask,
            position_ids=next_position + step,
            past_key_values=cache,
            use_cache=True,
        )
        cache = out.past_key_values
        logits = out.logits[:, -1]
    return torch.stack(tokens, 1), torch.stack(log_probs, 1)
