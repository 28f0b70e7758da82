"""A tiny tokenizer and causal LM built in code, for offline tests, recipes and benchmarks.

Nothing is downloaded: the tokenizer is a real fast tokenizer (the ``tokenizers``
library, one token per character plus a few special and role tokens) wrapped in
``transformers.PreTrainedTokenizerFast`` with a ChatML chat template, and the
model is a GPT-2 built from a ``transformers`` config with random weights.
"""

from __future__ import annotations

import string
from typing import Any

from rl_llm.data.chat_templates import CHATML_TEMPLATE

PAD_TOKEN = "<|pad|>"
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, "<|endoftext|>", "<|im_start|>", EOS_TOKEN, "<|unk|>")
ROLE_TOKENS = ("system", "user", "assistant", "tool")
CHARACTERS = string.digits + string.ascii_letters + string.punctuation + " \n"


def tiny_tokenizer(
    *, chat_template: str | None = CHATML_TEMPLATE, pad_token: str | None = PAD_TOKEN
) -> Any:
    """Builds a character-level fast tokenizer with a ChatML chat template.

    Every printable ASCII character, space and newline is one token; the special
    tokens ``<|pad|>``, ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ``<|unk|>``
    and the role names ``system``, ``user``, ``assistant``, ``tool`` are single tokens.
    ``eos_token`` is ``<|im_end|>`` (the end of a chat message) and the padding side is left.

    Args:
        chat_template: the Jinja chat template; ``None`` leaves the tokenizer without one.
        pad_token: the padding token; ``None`` builds a tokenizer without one (to test errors).

    Returns:
        A ``transformers.PreTrainedTokenizerFast``.

    Examples:
        >>> tok = tiny_tokenizer()
        >>> tok.decode(tok("12+7=")["input_ids"])
        '12+7='
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + ROLE_TOKENS + tuple(CHARACTERS))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=EOS_TOKEN,
        bos_token="<|endoftext|>",
        unk_token="<|unk|>",
        pad_token=pad_token,
        padding_side="left",
        model_max_length=1024,
    )
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    tokenizer.add_tokens(list(ROLE_TOKENS))
    if pad_token is None:
        tokenizer.pad_token = None
    tokenizer.chat_template = chat_template
    return tokenizer


def tiny_causal_lm(
    tokenizer: Any,
    *,
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_positions: int = 128,
    dropout: float = 0.0,
    seed: int = 0,
) -> Any:
    """Builds a randomly initialised GPT-2 causal LM sized for ``tokenizer``.

    Args:
        tokenizer: the tokenizer whose vocabulary, pad and eos ids the model uses.
        n_embd: width of the residual stream.
        n_layer: number of transformer blocks.
        n_head: attention heads per block.
        n_positions: context length (prompt + reply).
        dropout: residual, embedding and attention dropout. Defaults to 0: with dropout,
            the log-probs a policy samples with and the ones the trainer scores differ,
            and GRPO's importance ratios drift from 1 for no reason.
        seed: seed of the weight initialisation.

    Returns:
        A ``transformers.GPT2LMHeadModel`` in eval mode.

    Examples:
        >>> tok = tiny_tokenizer()
        >>> model = tiny_causal_lm(tok)
        >>> model.config.n_positions
        128
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
    return model.eval()
