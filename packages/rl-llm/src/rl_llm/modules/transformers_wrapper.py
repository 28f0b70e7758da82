"""``TransformersWrapper``: a ``transformers`` causal LM as a TensorDict policy (generate or score)."""

from __future__ import annotations

from typing import Any, Literal

import torch
from tensordict import NestedKey

from rl_llm.modules._sampling import SUPPORTED_KWARGS, check_sampling_kwargs, decode
from rl_llm.modules.base import InputMode, LLMWrapperBase, pad_left

Decoder = Literal["auto", "cache", "generate"]

_DEFAULT_GENERATE_KWARGS = {
    "max_new_tokens": 64,
    "do_sample": True,
    "temperature": 1.0,
    "top_k": 0,
    "top_p": 1.0,
}


def _context_length(model: Any) -> int | None:
    config = model.config
    for name in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return None


class TransformersWrapper(LLMWrapperBase):
    """Wraps any ``transformers`` causal LM: generates replies with log-probs, or scores given ones.

    Generation left-pads the batch of prompts (with position ids counted from each
    row's first real token, so padding never changes a reply), samples with
    ``generate_kwargs`` and returns, for every reply token, its log-probability under
    the model's unmodified distribution (temperature 1, no top-k / top-p), i.e. the
    same number :meth:`score` gives for that token. With the defaults (pure sampling)
    that is also the probability the token was sampled with.

    Two decoders produce the replies: ``"cache"``, a plain incremental loop on the
    model's KV cache that encodes each distinct prompt once (a GRPO group shares its
    prompt) and honours ``max_new_tokens``, ``do_sample``, ``temperature``, ``top_k`` and
    ``top_p``; and ``"generate"``, ``transformers``' ``generate``, for every other
    ``GenerationConfig`` setting (beams, penalties, ...). Greedy, both give the same tokens;
    on a tiny model the loop is several times faster.

    Args:
        model: a causal LM (``AutoModelForCausalLM``-like: ``generate`` and ``forward``
            returning ``logits``), or its name / local path (loaded with ``from_pretrained``).
        tokenizer: its tokenizer (or name / path); it must have a pad token. Defaults to the
            model's when ``model`` is a name.
        input_mode: ``"history"`` (default), ``"text"`` or ``"tokens"``.
        input_key: the input entry (default ``(<mode>, "prompt")`` / ``(<mode>, "full")``).
        attention_mask_key: mask of dense token inputs. Defaults to ``("masks", "all_attention_mask")``.
        generate: ``True`` to sample replies, ``False`` to score sequences (gradients flow).
        generate_kwargs: ``transformers.GenerationConfig`` fields; defaults
            ``max_new_tokens=64, do_sample=True, temperature=1.0, top_k=0, top_p=1.0``.
        decoder: ``"cache"`` (the KV-cache loop), ``"generate"`` (``model.generate``) or
            ``"auto"`` (default: the loop when ``generate_kwargs`` only holds the settings it
            implements, else ``generate``).
        pad_output: dense padded outputs instead of ragged ones. Defaults to ``False``.
        inplace: write into the input TensorDict. Defaults to ``True``.
        chat_template_name: a registered chat template name.
        chat_template: a Jinja chat template (default: the tokenizer's, else ChatML).
        history_key, text_key, tokens_key, masks_key, log_probs_key: output keys.
        return_log_probs: write ``log_probs`` (default ``True``; must stay so with ``generate=False``).
        device: where the outputs go (default: the model's device).

    Raises:
        ValueError: for a tokenizer without pad token, or prompts whose reply budget
            (``max_new_tokens``) does not fit in the model's context.

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_llm import ChatHistory, History
        >>> from rl_llm.tiny import tiny_causal_lm, tiny_tokenizer
        >>> tok = tiny_tokenizer()
        >>> policy = TransformersWrapper(tiny_causal_lm(tok), tokenizer=tok, generate_kwargs={"max_new_tokens": 4})
        >>> prompt = History.from_chats([[{"role": "user", "content": "1+1="}]])
        >>> td = policy(TensorDict(history=ChatHistory(prompt=prompt, batch_size=(1,)), batch_size=(1,)))
        >>> td["history", "response"].batch_size[0], td["log_probs", "response"].shape[0]
        (1, 1)
    """

    def __init__(
        self,
        model: Any,
        *,
        tokenizer: Any = None,
        input_mode: InputMode = "history",
        input_key: NestedKey | None = None,
        attention_mask_key: NestedKey = ("masks", "all_attention_mask"),
        generate: bool = True,
        generate_kwargs: dict[str, Any] | None = None,
        decoder: Decoder = "auto",
        pad_output: bool = False,
        inplace: bool = True,
        chat_template_name: str | None = None,
        chat_template: str | None = None,
        history_key: NestedKey = "history",
        text_key: NestedKey = "text",
        tokens_key: NestedKey = "tokens",
        masks_key: NestedKey = "masks",
        log_probs_key: NestedKey = "log_probs",
        return_log_probs: bool | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        if isinstance(model, str):  # a local path or a hub name, as TorchRL's
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(model) if tokenizer is None else tokenizer
            model = AutoModelForCausalLM.from_pretrained(model)
        if isinstance(tokenizer, str):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        super().__init__(
            tokenizer=tokenizer,
            input_mode=input_mode,
            input_key=input_key,
            attention_mask_key=attention_mask_key,
            generate=generate,
            pad_output=pad_output,
            inplace=inplace,
            chat_template_name=chat_template_name,
            chat_template=chat_template,
            history_key=history_key,
            text_key=text_key,
            tokens_key=tokens_key,
            masks_key=masks_key,
            log_probs_key=log_probs_key,
            return_log_probs=return_log_probs,
            device=device,
        )
        from transformers import GenerationConfig

        self.model = model
        generate_kwargs = dict(generate_kwargs or {})
        defaults = dict(_DEFAULT_GENERATE_KWARGS)
        if not generate_kwargs.get("do_sample", True):  # greedy: sampling settings do not apply
            for key in ("temperature", "top_k", "top_p"):
                defaults.pop(key)
        self.generate_kwargs = {**defaults, **generate_kwargs}
        unknown = [k for k in self.generate_kwargs if not hasattr(GenerationConfig(), k)]
        if unknown:
            raise ValueError(
                f"Unknown generate_kwargs {unknown}: they must be transformers.GenerationConfig fields."
            )
        if decoder not in ("auto", "cache", "generate"):
            raise ValueError(f"decoder must be 'auto', 'cache' or 'generate', got {decoder!r}.")
        if decoder == "auto":
            decoder = "cache" if set(self.generate_kwargs) <= SUPPORTED_KWARGS else "generate"
        if decoder == "cache":
            check_sampling_kwargs(self.generate_kwargs)
        self.decoder = decoder
        self._generation_config = GenerationConfig(
            **self.generate_kwargs,
            pad_token_id=self.pad_token_id,
            eos_token_id=self.eos_token_id,
            return_dict_in_generate=True,
            output_logits=True,
        )
        self.context_length = _context_length(model)

    @property
    def device(self) -> torch.device:
        """Where the model's parameters live."""
        return next(self.model.parameters()).device

    def _check_context(self, length: int, what: str) -> None:
        if self.context_length is not None and length > self.context_length:
            raise ValueError(
                f"{what} needs {length} positions but the model's context holds {self.context_length}. "
                "Shorten the prompts, lower generate_kwargs['max_new_tokens'], or use a model with a longer context."
            )

    @torch.no_grad()
    def _generate_tokens(
        self, prompts: list[torch.Tensor]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        device = self.device
        input_ids, attention_mask = pad_left([p.to(device) for p in prompts], self.pad_token_id)
        width = input_ids.shape[1]
        self._check_context(
            width + self.generate_kwargs["max_new_tokens"],
            f"The longest prompt ({width} tokens) plus max_new_tokens={self.generate_kwargs['max_new_tokens']}",
        )
        if self.decoder == "cache":
            replies, log_probs = decode(
                self.model,
                input_ids,
                attention_mask,
                eos_token_id=self.eos_token_id,
                pad_token_id=self.pad_token_id,
                **self.generate_kwargs,
            )
        else:
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                generation_config=self._generation_config,
            )
            replies = out.sequences[:, width:]
            log_probs = torch.stack(out.logits, dim=1).float().log_softmax(-1)
            log_probs = log_probs.gather(-1, replies.unsqueeze(-1)).squeeze(-1)
        is_eos = replies == self.eos_token_id
        has_eos = is_eos.any(-1)
        lengths = torch.where(has_eos, is_eos.float().argmax(-1) + 1, replies.shape[1]).tolist()
        return (
            [r[:n] for r, n in zip(replies, lengths, strict=True)],
            [lp[:n] for lp, n in zip(log_probs, lengths, strict=True)],
        )

    def score(
        self, tokens: torch.Tensor, attention_mask: torch.Tensor, *, return_entropy: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Per-token log-probs of ``tokens`` under the model, with gradients (see the base class)."""
        if tokens.shape != attention_mask.shape or tokens.ndim != 2:
            raise ValueError(
                f"tokens and attention_mask must both be [batch, length], got {tuple(tokens.shape)} and "
                f"{tuple(attention_mask.shape)}."
            )
        self._check_context(
            tokens.shape[1], f"A sequence of {tokens.shape[1]} tokens (prompt + reply)"
        )
        device = self.device
        tokens, attention_mask = tokens.to(device), attention_mask.to(device).long()
        position_ids = (attention_mask.cumsum(-1) - 1).clamp_min(0)
        logits = self.model(
            input_ids=tokens, attention_mask=attention_mask, position_ids=position_ids
        ).logits
        log_softmax = logits[:, :-1].float().log_softmax(-1)
        picked = log_softmax.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)
        # a token counts when it and the token before it are real (the first real token has no context)
        valid = (attention_mask[:, 1:] * attention_mask[:, :-1]).bool()
        zero = picked.new_zeros(tokens.shape[0], 1)
        log_probs = torch.cat([zero, picked.masked_fill(~valid, 0.0)], dim=-1)
        if not return_entropy:
            return log_probs
        entropy = -(log_softmax.exp() * log_softmax).sum(-1).masked_fill(~valid, 0.0)
        return log_probs, torch.cat([zero, entropy], dim=-1)
