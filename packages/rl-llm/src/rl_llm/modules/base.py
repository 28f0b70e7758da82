"""``LLMWrapperBase``: the TensorDict side of a language-model policy, shared by every backend.

A backend (``transformers`` here; vLLM or SGLang elsewhere) implements two
methods on token ids and nothing else:

* :meth:`LLMWrapperBase._generate_tokens`: prompts (lists of ids) in, sampled
  replies and their per-token log-probabilities out;
* :meth:`LLMWrapperBase.score`: padded full sequences in, per-token
  log-probabilities out, differentiable when the backend trains.

Everything else (reading a history, text or tokens, rendering chat templates,
padding, parsing replies back into messages, writing the ``history`` / ``text``
/ ``tokens`` / ``log_probs`` / ``masks`` containers in either layout) lives here.
"""

from __future__ import annotations

import abc
from typing import Any, Literal

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase, lazy_stack
from tensordict.nn import TensorDictModuleBase

from rl_llm.data.history import PLACEHOLDER_ROLE, History
from rl_llm.modules.containers import ChatHistory, LogProbs, Masks, Text, Tokens

InputMode = Literal["history", "text", "tokens"]


def pad_left(rows: list[torch.Tensor], pad_value: int | float) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pads 1-d tensors to ``[len(rows), max_len]``; returns the batch and its 0/1 mask."""
    width = max(r.numel() for r in rows)
    out = rows[0].new_full((len(rows), width), pad_value)
    mask = torch.zeros(len(rows), width, dtype=torch.long, device=rows[0].device)
    for i, r in enumerate(rows):
        if r.numel():
            out[i, width - r.numel() :] = r
            mask[i, width - r.numel() :] = 1
    return out, mask


def pad_right(
    rows: list[torch.Tensor], pad_value: int | float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pads 1-d tensors to ``[len(rows), max_len]``; returns the batch and its 0/1 mask."""
    width = max(r.numel() for r in rows)
    out = rows[0].new_full((len(rows), width), pad_value)
    mask = torch.zeros(len(rows), width, dtype=torch.long, device=rows[0].device)
    for i, r in enumerate(rows):
        out[i, : r.numel()] = r
        mask[i, : r.numel()] = 1
    return out, mask


class LLMWrapperBase(TensorDictModuleBase, abc.ABC):
    """Policy over a language model that reads and writes TensorDicts.

    In generate mode (``generate=True``) it reads prompts (``input_mode``:
    ``"history"`` from ``("history", "prompt")``, ``"text"`` from ``("text", "prompt")``,
    ``"tokens"`` from ``("tokens", "prompt")``), samples one reply per prompt and
    writes ``tokens`` / ``text`` / ``log_probs`` / ``masks`` (and ``history`` in history
    mode) with their ``prompt``, ``response`` and ``full`` views. In score mode
    (``generate=False``) it reads whole sequences (``("history", "full")``,
    ``("text", "full")`` or ``("tokens", "full")``) and writes ``("log_probs", "full")``
    with gradients, plus ``tokens`` and ``masks``.

    Subclasses implement :meth:`_generate_tokens` and :meth:`score`; see the module docstring.

    Args:
        tokenizer: a ``transformers`` tokenizer with a pad token.
        input_mode: ``"history"``, ``"text"`` or ``"tokens"``.
        input_key: where the input lives; defaults to ``(<mode>, "prompt")`` in generate
            mode and ``(<mode>, "full")`` in score mode.
        attention_mask_key: mask of dense (left-padded) token inputs; absent means
            every non-pad token is real.
        generate: generate replies (``True``) or score given sequences (``False``).
        pad_output: write dense padded tensors instead of per-element ragged ones.
        inplace: write into the input TensorDict (``True``) or return a new one.
        chat_template_name: a registered chat template (``rl_llm.add_chat_template``).
        chat_template: a Jinja chat template; default: the tokenizer's, else ChatML.
        history_key, text_key, tokens_key, masks_key, log_probs_key: output keys.
        return_log_probs: write ``log_probs`` (default ``True``); ``False`` only in generate
            mode (scoring exists to produce them).
        device: where the outputs go (default: where the model computed them).
    """

    def __init__(
        self,
        *,
        tokenizer: Any,
        input_mode: InputMode = "history",
        input_key: NestedKey | None = None,
        attention_mask_key: NestedKey = ("masks", "all_attention_mask"),
        generate: bool = True,
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
        super().__init__()
        if return_log_probs is False and not generate:
            raise ValueError(
                "return_log_probs must be True when generate=False: scoring sequences is what "
                "produces the log-probs (use generate=True to sample replies without them)."
            )
        if input_mode not in ("history", "text", "tokens"):
            raise ValueError(
                f"input_mode must be 'history', 'text' or 'tokens', got {input_mode!r}."
            )
        if tokenizer is None:
            raise ValueError("A tokenizer is required (the one the model was trained with).")
        if tokenizer.pad_token_id is None:
            raise ValueError(
                "The tokenizer has no pad token, so batches of prompts of different lengths cannot be padded. "
                "Set one, e.g. tokenizer.pad_token = tokenizer.eos_token, or add a dedicated '<pad>' token."
            )
        self.tokenizer = tokenizer
        self.input_mode = input_mode
        self.generate = generate
        self.pad_output = pad_output
        self.inplace = inplace
        self.chat_template_name = chat_template_name
        self.chat_template = chat_template
        self.history_key = history_key
        self.text_key = text_key
        self.tokens_key = tokens_key
        self.masks_key = masks_key
        self.log_probs_key = log_probs_key
        self.attention_mask_key = attention_mask_key
        mode_key = {"history": history_key, "text": text_key, "tokens": tokens_key}[input_mode]
        self.input_key = (
            input_key
            if input_key is not None
            else _join(mode_key, "prompt" if generate else "full")
        )
        self.in_keys = [self.input_key]
        self.return_log_probs = return_log_probs is not False
        self.device_out = torch.device(device) if device is not None else None
        self.out_keys = [tokens_key, masks_key]
        if self.return_log_probs:
            self.out_keys.append(log_probs_key)
        if generate:
            self.out_keys.append(text_key)
            if input_mode == "history":
                self.out_keys.append(history_key)

    @property
    def pad_token_id(self) -> int:
        """The tokenizer's pad id."""
        return self.tokenizer.pad_token_id

    @property
    def eos_token_id(self) -> int:
        """The tokenizer's end-of-message id (generation stops there)."""
        return self.tokenizer.eos_token_id

    @abc.abstractmethod
    def _generate_tokens(
        self, prompts: list[torch.Tensor]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Samples one reply per prompt.

        Args:
            prompts: 1-d token-id tensors, one per prompt (unpadded).

        Returns:
            The reply ids (1-d, ending with the eos id when the model stopped by itself)
            and the log-probability of each reply token under the model, one pair per prompt.
        """

    @abc.abstractmethod
    def score(
        self, tokens: torch.Tensor, attention_mask: torch.Tensor, *, return_entropy: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Per-token log-probabilities of padded sequences.

        Args:
            tokens: ``[B, L]`` token ids (any padding side).
            attention_mask: ``[B, L]``, 1 on real tokens.
            return_entropy: also return the per-token entropy of the model's distribution.

        Returns:
            ``[B, L]`` log-probabilities: entry ``t`` is ``log p(tokens[t] | tokens[<t])``,
            0 on each row's first real token and on padding (and the entropy, same shape).
        """

    def forward(self, tensordict: TensorDictBase, **kwargs: Any) -> TensorDictBase:
        """Generates replies or scores sequences (see the class docstring)."""
        if tensordict.batch_dims > 1:
            raise ValueError(
                f"{type(self).__name__} takes a TensorDict with at most one batch dim, got batch_size "
                f"{tuple(tensordict.batch_size)}; flatten it first (td.reshape(-1))."
            )
        single = tensordict.batch_dims == 0
        td = tensordict.unsqueeze(0) if single else tensordict
        out = self._forward_generate(td) if self.generate else self._forward_score(td)
        if single:
            out = out.squeeze(0)
        if not self.return_log_probs:
            out = out.exclude(self.log_probs_key)
        if self.device_out is not None:
            out = out.to(self.device_out)
        if not self.inplace:
            return out
        tensordict.update(out)
        return tensordict

    # ---- inputs -----------------------------------------------------------------
    def _prompt_history(self, td: TensorDictBase) -> History:
        history = td.get(self.input_key, None)
        if history is None:
            raise KeyError(
                f"input_mode='history' reads a History at {self.input_key!r}, which is missing; keys present: "
                f"{sorted(map(str, td.keys(True, True)))}. Set input_key=... or build it with History.from_chats."
            )
        if not isinstance(history, History):
            raise TypeError(
                f"{self.input_key!r} must hold a History, got {type(history).__name__}."
            )
        if history.batch_dims == 1:
            history = history.unsqueeze(0)
        return history

    def _render(self, history: History, add_generation_prompt: bool) -> list[str]:
        return history.apply_chat_template(
            tokenizer=self.tokenizer,
            add_generation_prompt=add_generation_prompt,
            chat_template=self.chat_template,
            chat_template_name=self.chat_template_name,
        )

    def _texts(self, td: TensorDictBase) -> list[str]:
        texts = td.get(self.input_key, None)
        if texts is None:
            raise KeyError(
                f"input_mode='text' reads strings at {self.input_key!r}, which is missing."
            )
        if not isinstance(texts, (str, list)) and hasattr(texts, "tolist"):
            texts = texts.tolist()
        texts = [texts] if isinstance(texts, str) else list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"{self.input_key!r}[{i}] must be a str, got {type(t).__name__}.")
        return texts

    def _encode(self, texts: list[str]) -> list[torch.Tensor]:
        ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        return [torch.as_tensor(i, dtype=torch.long) for i in ids]

    def _token_rows(self, td: TensorDictBase, key: NestedKey) -> list[torch.Tensor]:
        """Token rows without padding, from a dense ``[B, L]`` entry or a ragged lazy stack."""
        value = _get_rows(td, key)
        if value is None:
            raise KeyError(f"input_mode='tokens' reads token ids at {key!r}, which is missing.")
        if isinstance(value, list):
            return [torch.as_tensor(v, dtype=torch.long).reshape(-1) for v in value]
        if value.ndim != 2:
            raise ValueError(
                f"{key!r} must be [batch, length] token ids, got shape {tuple(value.shape)}."
            )
        mask = _get_rows(td, self.attention_mask_key)
        if mask is None:
            if self.pad_token_id == self.eos_token_id:
                raise KeyError(
                    f"Dense token ids at {key!r} need their attention mask at {self.attention_mask_key!r}: "
                    "the pad token is also the eos token, so padding cannot be told from real tokens."
                )
            mask = value != self.pad_token_id
        if isinstance(mask, list):
            mask = torch.stack(mask)
        return [row[m.bool()] for row, m in zip(value, mask, strict=True)]

    @staticmethod
    def _check_not_empty(prompts: list[torch.Tensor]) -> None:
        empty = [i for i, p in enumerate(prompts) if p.numel() == 0]
        if empty:
            raise ValueError(
                f"Empty prompt(s) at batch index {empty}: every prompt needs at least one token."
            )

    # ---- generate -------------------------------------------------------------------
    def _forward_generate(self, td: TensorDictBase) -> TensorDictBase:
        history = None
        if self.input_mode == "history":
            history = self._prompt_history(td)
            prompt_texts = self._render(history, add_generation_prompt=True)
            prompts = self._encode(prompt_texts)
        elif self.input_mode == "text":
            prompt_texts = self._texts(td)
            prompts = self._encode(prompt_texts)
        else:
            prompts = self._token_rows(td, self.input_key)
            prompt_texts = None
        self._check_not_empty(prompts)
        responses, response_lps = self._generate_tokens(prompts)
        if prompt_texts is None:
            prompt_texts = self.tokenizer.batch_decode(prompts, skip_special_tokens=False)
        response_texts = self.tokenizer.batch_decode(responses, skip_special_tokens=False)
        if self.pad_output:
            return self._assemble_dense(
                td, prompts, responses, response_lps, history, prompt_texts, response_texts
            )
        rows = []
        for i, (p, r, lp) in enumerate(zip(prompts, responses, response_lps, strict=True)):
            p = p.to(r.device)
            full = torch.cat([p, r])
            row = {
                "tokens": Tokens(prompt=p, response=r, full=full, padded=False),
                "log_probs": LogProbs(
                    response=lp, full=torch.cat([lp.new_zeros(p.numel()), lp]), padded=False
                ),
                "masks": Masks(
                    all_attention_mask=torch.ones_like(full, dtype=torch.bool),
                    all_assistant_mask=torch.cat(
                        [
                            torch.zeros_like(p, dtype=torch.bool),
                            torch.ones_like(r, dtype=torch.bool),
                        ]
                    ),
                    padded=False,
                ),
                "text": Text(
                    prompt=prompt_texts[i],
                    response=response_texts[i],
                    full=prompt_texts[i] + response_texts[i],
                ),
            }
            if history is not None:
                row["history"] = self._reply_history(history[i], prompt_texts[i], response_texts[i])
            rows.append(row)
        return self._assemble(td, rows, [p.numel() for p in prompts])

    def _assemble_dense(
        self,
        td: TensorDictBase,
        prompts: list[torch.Tensor],
        responses: list[torch.Tensor],
        response_lps: list[torch.Tensor],
        history: History | None,
        prompt_texts: list[str],
        response_texts: list[str],
    ) -> TensorDictBase:
        """The ``pad_output=True`` layout built from whole padded batches (no per-row containers)."""
        device = responses[0].device
        prompt, prompt_mask = pad_left([p.to(device) for p in prompts], self.pad_token_id)
        response, response_mask = pad_right(responses, self.pad_token_id)
        response_lp = pad_right(response_lps, 0.0)[0]
        batch = (len(prompts),)
        out = TensorDict(batch_size=td.batch_size, device=td.device)
        out.set(
            self.tokens_key,
            Tokens(
                prompt=prompt,
                response=response,
                full=torch.cat([prompt, response], -1),
                padded=True,
                batch_size=batch,
            ),
        )
        out.set(
            self.log_probs_key,
            LogProbs(
                response=response_lp,
                full=torch.cat([response_lp.new_zeros(prompt.shape), response_lp], -1),
                padded=True,
                batch_size=batch,
            ),
        )
        out.set(
            self.masks_key,
            Masks(
                all_attention_mask=torch.cat([prompt_mask, response_mask], -1).bool(),
                all_assistant_mask=torch.cat(
                    [torch.zeros_like(prompt_mask), response_mask], -1
                ).bool(),
                padded=True,
                batch_size=batch,
            ),
        )
        texts = [
            Text(prompt=p, response=r, full=p + r)
            for p, r in zip(prompt_texts, response_texts, strict=True)
        ]
        out.set(self.text_key, lazy_stack(texts))
        if history is not None:
            replies = [
                self._reply_history(history[i], prompt_texts[i], response_texts[i])
                for i in range(len(prompts))
            ]
            out.set(self.history_key, lazy_stack(replies))
        return out

    def _reply_history(self, prompt: History, prompt_text: str, response_text: str) -> ChatHistory:
        parsed = History.from_text(
            prompt_text + response_text,
            chat_template_name=self.chat_template_name,
            chat_template=self.chat_template,
            tokenizer=self.tokenizer,
        )
        n_prompt = sum(role != PLACEHOLDER_ROLE for role in prompt.role)
        if parsed.batch_size[0] <= n_prompt:
            raise ValueError(
                f"The reply {response_text!r} did not parse into a new message after the {n_prompt} prompt "
                "messages; the chat template and its parser disagree (see rl_llm.add_chat_template)."
            )
        response = parsed[n_prompt:]
        full = prompt.extend(response, inplace=False)
        return ChatHistory(prompt=prompt, response=response, full=full)

    # ---- score ------------------------------------------------------------------------
    def _forward_score(self, td: TensorDictBase) -> TensorDictBase:
        assistant = None
        if self.input_mode == "history":
            history = self._prompt_history(td)
            rendered = [
                history[i].apply_chat_template(
                    tokenizer=self.tokenizer,
                    add_generation_prompt=False,
                    chat_template=self.chat_template,
                    chat_template_name=self.chat_template_name,
                    return_assistant_tokens_mask=True,
                )
                for i in range(history.batch_size[0])
            ]
            fulls = [r["input_ids"] for r in rendered]
            assistant = [r["assistant_masks"].bool() for r in rendered]
        elif self.input_mode == "text":
            fulls = self._encode(self._texts(td))
        else:
            dense = _get_rows(td, self.input_key)
            if (
                isinstance(dense, torch.Tensor)
                and _get_rows(td, self.attention_mask_key) is not None
            ):
                return self._score_dense(td, dense)
            fulls = self._token_rows(td, self.input_key)
            given = _get_rows(td, _join(self.masks_key, "all_assistant_mask"))
            if given is not None:
                given = list(given) if isinstance(given, list) else _unpad(given, td, self)
                assistant = [g.bool() for g in given]
        self._check_not_empty(fulls)
        tokens, attention = pad_right(fulls, self.pad_token_id)
        log_probs = self.score(tokens, attention)
        rows = []
        for i, f in enumerate(fulls):
            n = f.numel()
            masks = Masks(
                all_attention_mask=torch.ones(n, dtype=torch.bool, device=f.device), padded=False
            )
            if assistant is not None:
                masks.all_assistant_mask = assistant[i]
            rows.append(
                {
                    "tokens": Tokens(full=f, padded=False),
                    "log_probs": LogProbs(full=log_probs[i, :n], padded=False),
                    "masks": masks,
                }
            )
        return self._assemble(td, rows, [f.numel() for f in fulls])

    def _score_dense(self, td: TensorDictBase, tokens: torch.Tensor) -> TensorDictBase:
        """Scores dense padded tokens in place: log-probs aligned with the given layout."""
        mask = _get_rows(td, self.attention_mask_key)
        mask = torch.stack(mask) if isinstance(mask, list) else mask
        self._check_not_empty([m[m.bool()] for m in mask])
        log_probs = self.score(tokens, mask)
        out = TensorDict(batch_size=td.batch_size, device=td.device)
        out.set(self.log_probs_key, LogProbs(full=log_probs, padded=True, batch_size=td.batch_size))
        return out

    # ---- outputs --------------------------------------------------------------------
    def _assemble(
        self, td: TensorDictBase, rows: list[dict[str, Any]], prompt_lens: list[int]
    ) -> TensorDictBase:
        """Stacks per-element containers, ragged or padded (prompt part left, response part right)."""
        keys = {
            "tokens": self.tokens_key,
            "log_probs": self.log_probs_key,
            "masks": self.masks_key,
            "text": self.text_key,
            "history": self.history_key,
        }
        out = TensorDict(batch_size=td.batch_size, device=td.device)
        for name in rows[0]:
            values = [r[name] for r in rows]
            stacked = (
                lazy_stack(values)
                if name in ("history", "text")
                else self._layout(values, self.pad_token_id if name == "tokens" else 0, prompt_lens)
            )
            out.set(keys[name], stacked)
        return out

    def _layout(self, values: list[Any], pad: int, prompt_lens: list[int]) -> Any:
        if not self.pad_output:
            return lazy_stack(values)
        cls = type(values[0])
        fields = {}
        for field in cls.__dataclass_fields__:
            column = [getattr(v, field) for v in values]
            if field == "padded" or column[0] is None:
                continue
            value = False if column[0].dtype == torch.bool else pad
            if field == "prompt":
                fields[field] = pad_left(column, value)[0]
            elif field == "response":
                fields[field] = pad_right(column, value)[0]
            else:
                heads = [c[:n] for c, n in zip(column, prompt_lens, strict=True)]
                tails = [c[n:] for c, n in zip(column, prompt_lens, strict=True)]
                fields[field] = torch.cat(
                    [pad_left(heads, value)[0], pad_right(tails, value)[0]], -1
                )
        return cls(**fields, padded=True, batch_size=(len(values),))


def _join(key: NestedKey, leaf: str) -> tuple[str, ...]:
    return (*((key,) if isinstance(key, str) else tuple(key)), leaf)


def _get_rows(td: TensorDictBase, key: NestedKey) -> torch.Tensor | list[torch.Tensor] | None:
    """The entry at ``key``: a tensor when rows share a shape, else the list of rows."""
    try:
        return td.get(key, None)
    except RuntimeError:
        return list(td.get(key, as_list=True))


def _unpad(value: torch.Tensor, td: TensorDictBase, wrapper: LLMWrapperBase) -> list[torch.Tensor]:
    mask = _get_rows(td, wrapper.attention_mask_key)
    if mask is None:
        return list(value)
    mask = torch.stack(mask) if isinstance(mask, list) else mask
    return [row[m.bool()] for row, m in zip(value, mask, strict=True)]
