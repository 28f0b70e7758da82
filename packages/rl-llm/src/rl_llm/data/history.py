"""``History``: a batched, ragged chat container that stacks and indexes like a TensorDict."""

from __future__ import annotations

import re
from typing import Any

import torch
from tensordict import TensorClass, TensorDict, TensorDictBase, lazy_stack

from rl_llm.data.chat_templates import (
    check_round_trip,
    get_chat_template,
    get_inverse_parser,
    template_name_of,
)

_GENERATION_BLOCK = re.compile(r"\{%-?\s*generation\s*-?%\}")

PLACEHOLDER_ROLE = "<none>"
"""Role of padding messages (kept for congruent stacks, dropped when rendering)."""


def _check_message(message: Any, where: str) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise TypeError(
            f"{where} must be a dict with 'role' and 'content', got {type(message).__name__}: {message!r}."
        )
    missing = [key for key in ("role", "content") if key not in message]
    if missing:
        raise KeyError(
            f"{where} lacks {missing}; a message is {{'role': str, 'content': str}}, got keys {sorted(message)}."
        )
    for key in ("role", "content"):
        if not isinstance(message[key], str):
            raise TypeError(
                f"{where}[{key!r}] must be a str, got {type(message[key]).__name__}: {message[key]!r}."
            )
    return message


class History(TensorClass["nocast"]):
    """A batch of conversations: each element is one message (``role``, ``content``, ``is_complete``).

    The last batch dimension runs over the messages of a conversation; leading
    dimensions run over conversations and may be ragged (lazily stacked), so a
    batch of chats of different lengths has shape ``[B, -1]``. A ``History``
    indexes, stacks, unbinds and nests in a TensorDict like any tensorclass.
    Messages whose role is ``"<none>"`` are placeholders: they keep stacks
    congruent and are dropped when rendering.

    Attributes:
        role: who speaks (``"system"``, ``"user"``, ``"assistant"``, ``"tool"``...).
        content: the text of the message.
        is_complete: ``False`` when the message was cut before its end token
            (a reply that hit the token budget).

    Examples:
        >>> h = History.from_chats([[{"role": "user", "content": "1+1="}], [{"role": "user", "content": "2+2="}]])
        >>> h.batch_size
        torch.Size([2, 1])
        >>> h = h.append(History(role=["assistant", "assistant"], content=["2", "4"], batch_size=(2,)))
        >>> h[1].content
        ['2+2=', '4']
    """

    role: str
    content: str
    is_complete: bool = True

    @classmethod
    def from_chats(cls, chats: list[dict[str, Any]] | list[list[dict[str, Any]]]) -> History:
        """Builds a History from one chat (a list of message dicts) or a nested list of chats.

        Args:
            chats: ``[{"role": ..., "content": ...}, ...]`` gives shape ``[n_messages]``;
                a list of such chats gives ``[n_chats, n_messages]`` (ragged if lengths differ),
                and so on for deeper nesting.

        Returns:
            The History.

        Raises:
            ValueError: for an empty chat or an empty list of chats.
            KeyError, TypeError: for a message without a str ``role`` and ``content``.

        Examples:
            >>> History.from_chats([{"role": "user", "content": "hi"}]).role
            ['user']
        """
        return cls._from_chats(chats, "chats")

    @classmethod
    def _from_chats(cls, chats: Any, where: str) -> History:
        if not isinstance(chats, (list, tuple)):
            raise TypeError(
                f"{where} must be a list of message dicts or a list of chats, got {type(chats).__name__}."
            )
        if not chats:
            raise ValueError(
                f"{where} is empty: a chat needs at least one message (an empty prompt cannot be rendered)."
            )
        if isinstance(chats[0], dict):
            messages = [_check_message(m, f"{where}[{i}]") for i, m in enumerate(chats)]
            return cls(
                role=[m["role"] for m in messages],
                content=[m["content"] for m in messages],
                is_complete=torch.tensor([bool(m.get("is_complete", True)) for m in messages]),
                batch_size=(len(messages),),
            )
        return lazy_stack([cls._from_chats(chat, f"{where}[{i}]") for i, chat in enumerate(chats)])

    @classmethod
    def from_messages(cls, messages: list[tuple[str, str, bool]]) -> History:
        """Builds a one-chat History from ``(role, content, is_complete)`` triples (a parser's output)."""
        if not messages:
            raise ValueError("No message to build a History from.")
        return cls(
            role=[m[0] for m in messages],
            content=[m[1] for m in messages],
            is_complete=torch.tensor([bool(m[2]) for m in messages]),
            batch_size=(len(messages),),
        )

    def to_chats(self) -> list:
        """The messages as (nested) lists of ``{"role", "content"}`` dicts, placeholders dropped."""
        if self.batch_dims == 0:
            return {"role": self.role, "content": self.content}
        if self.batch_dims == 1:
            return [
                {"role": r, "content": c}
                for r, c in zip(self.role, self.content, strict=True)
                if r != PLACEHOLDER_ROLE
            ]
        return [row.to_chats() for row in self.unbind(0)]

    @classmethod
    def from_text(
        cls,
        text: str | list[str],
        chat_template_name: str | None = None,
        chat_template: str | None = None,
        tokenizer: Any = None,
    ) -> History:
        """Parses rendered chat text back into a History (the inverse of :meth:`apply_chat_template`).

        The parser is the one registered for ``chat_template_name``; without a name,
        the registered template equal to ``chat_template`` (or the tokenizer's) is
        used, else ChatML. When a tokenizer or template is given, the pair is first
        checked to round-trip (:func:`check_round_trip`), so a template the parser
        cannot invert fails loudly instead of giving wrong messages.

        Args:
            text: one rendered conversation (shape ``[n_messages]``) or a list of them
                (shape ``[n_texts, -1]``). A final block without its end token gives an
                incomplete message.
            chat_template_name: the registered template whose parser to use.
            chat_template: the Jinja template the text was rendered with.
            tokenizer: the tokenizer the text was rendered with.

        Returns:
            The History.

        Raises:
            ValueError: if the template does not round-trip or the text holds no message.

        Examples:
            >>> History.from_text("<|im_start|>user\\n1+1=<|im_end|>\\n<|im_start|>assistant\\n2").is_complete
            tensor([ True, False])
        """
        if not isinstance(text, str):
            return lazy_stack(
                [cls.from_text(t, chat_template_name, chat_template, tokenizer) for t in text]
            )
        template = (
            chat_template
            if chat_template is not None
            else getattr(tokenizer, "chat_template", None)
        )
        if chat_template_name is None:
            chat_template_name = template_name_of(template) or "chatml_format"
        if template is not None and tokenizer is not None:
            check_round_trip(tokenizer, chat_template_name, template)
        messages = get_inverse_parser(chat_template_name)(text)
        if not messages:
            raise ValueError(
                f"No message found in {text[:200]!r} with the {chat_template_name!r} parser. Decode generated tokens "
                "with skip_special_tokens=False so that the role and end markers survive."
            )
        return cls.from_messages(messages)

    def _resolve_template(
        self, tokenizer: Any, chat_template: str | None, chat_template_name: str | None
    ) -> str:
        if chat_template is not None:
            return chat_template
        if chat_template_name is not None:
            return get_chat_template(chat_template_name)
        own = getattr(tokenizer, "chat_template", None)
        return own if own else get_chat_template("chatml_format")

    def apply_chat_template(
        self,
        *,
        tokenizer: Any,
        add_generation_prompt: bool = True,
        chat_template: str | None = None,
        chat_template_name: str | None = None,
        continue_final_message: bool = False,
        tokenize: bool | None = None,
        padding: bool | str = False,
        truncation: bool | str = False,
        return_tensors: str | None = None,
        return_dict: bool | None = None,
        return_assistant_tokens_mask: bool = False,
        **kwargs: Any,
    ) -> str | list | TensorDictBase:
        """Renders the conversations with a chat template, as text or tokens.

        The template is ``chat_template`` if given, else the one registered as
        ``chat_template_name``, else the tokenizer's own, else ChatML.

        Args:
            tokenizer: a ``transformers`` tokenizer.
            add_generation_prompt: end with the header of an assistant message. Defaults to ``True``.
            chat_template: a Jinja template.
            chat_template_name: a registered template name (see ``rl_llm.add_chat_template``).
            continue_final_message: leave the last message open (no end token).
            tokenize: return tokens; defaults to ``True`` when masks or tensors are asked for.
            padding: pad a batch of conversations to one length (the tokenizer's padding side).
            truncation: truncation strategy of the tokenizer.
            return_tensors: ``"pt"`` (default when tokenizing).
            return_dict: return a TensorDict with ``input_ids``, ``attention_mask``
                (and ``assistant_masks``); defaults to ``True`` with masks.
            return_assistant_tokens_mask: add ``assistant_masks``, 1 on tokens inside
                ``{% generation %}`` blocks (the assistant's text and end token).
            **kwargs: passed to ``tokenizer.apply_chat_template``.

        Returns:
            For one conversation (``batch_dims == 1``): a str, a token tensor, or a TensorDict
            of 1-d tensors. For more batch dims: a (nested) list of str, a list of tensors,
            or a TensorDict with leading batch dims (lazily stacked when ragged, dense when padded).

        Raises:
            ValueError: for an empty conversation, or masks asked of a template without
                ``{% generation %}`` blocks.

        Examples:
            >>> from rl_llm.tiny import tiny_tokenizer
            >>> h = History.from_chats([{"role": "user", "content": "1+1="}])
            >>> h.apply_chat_template(tokenizer=tiny_tokenizer())
            '<|im_start|>user\\n1+1=<|im_end|>\\n<|im_start|>assistant\\n'
        """
        if self.batch_dims == 0:
            raise ValueError(
                "A 0-dim History is one message, not a conversation: call .unsqueeze(0) first."
            )
        template = self._resolve_template(tokenizer, chat_template, chat_template_name)
        if tokenize is None:
            tokenize = (
                return_assistant_tokens_mask or return_tensors is not None or bool(return_dict)
            )
        if return_assistant_tokens_mask and not _GENERATION_BLOCK.search(template):
            raise ValueError(
                "return_assistant_tokens_mask=True needs a chat template that wraps assistant text in "
                "{% generation %}...{% endgeneration %}; this one does not. Pass chat_template_name='chatml_format' "
                "or a template with generation blocks."
            )
        if tokenize:
            return_tensors = "pt" if return_tensors is None else return_tensors
            return_dict = return_assistant_tokens_mask if return_dict is None else return_dict
        options = dict(
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            truncation=truncation,
            return_assistant_tokens_mask=return_assistant_tokens_mask,
            **kwargs,
        )
        batched = tokenize and return_dict and padding
        if self.batch_dims > 1 and not batched:
            results = [
                row.apply_chat_template(
                    tokenizer=tokenizer,
                    chat_template=template,
                    tokenize=tokenize,
                    padding=padding,
                    return_tensors=return_tensors,
                    return_dict=return_dict,
                    **options,
                )
                for row in self.unbind(0)
            ]
            return _stack(results) if tokenize and return_dict else results
        conversations = []
        for i, chat in enumerate(_rows(self)):
            messages = chat.to_chats()
            if not messages:
                raise ValueError(
                    f"Conversation {i} has no message (an empty prompt): nothing to render."
                )
            conversations.append(messages)
        if self.batch_dims == 1:
            out = tokenizer.apply_chat_template(
                conversations[0],
                chat_template=template,
                tokenize=tokenize,
                return_tensors=return_tensors,
                return_dict=return_dict,
                **options,
            )
            if tokenize and return_dict:
                return TensorDict(
                    {k: torch.as_tensor(v).squeeze(0) for k, v in out.items()}, batch_size=()
                )
            return out.squeeze(0) if isinstance(out, torch.Tensor) else out
        out = tokenizer.apply_chat_template(
            conversations,
            chat_template=template,
            tokenize=True,
            padding=padding,
            return_tensors=return_tensors,
            return_dict=True,
            **options,
        )
        td = TensorDict(
            {k: torch.as_tensor(v) for k, v in out.items()}, batch_size=(len(conversations),)
        )
        lead = self.batch_size[:-1]
        if any(d < 0 for d in lead):
            raise ValueError(
                f"Cannot pad a History whose leading dims {tuple(lead)} are ragged; index it row by row."
            )
        return td.reshape(lead)

    def append(self, history: History, *, inplace: bool = True, dim: int = -1) -> History:
        """Appends one message per conversation along ``dim`` (default: the message dim).

        Args:
            history: a History with one dim less than ``self`` (e.g. one message per chat).
            inplace: modify ``self`` (and return it); ``False`` returns a new History.
            dim: the dim to grow.

        Returns:
            The grown History.

        Raises:
            RuntimeError: if the dims of ``history`` do not fit.

        Examples:
            >>> h = History.from_chats([{"role": "user", "content": "1+1="}])
            >>> h.append(History(role="assistant", content="2")).role
            ['user', 'assistant']
        """
        if self.batch_dims == 0:
            raise RuntimeError(
                "Cannot append to a 0-dim History (a single message): call .unsqueeze(0) on it first."
            )
        if history.batch_dims != self.batch_dims - 1:
            raise RuntimeError(
                f"append expects a History with one dim less than self: self has batch_size {tuple(self.batch_size)}, "
                f"the new one {tuple(history.batch_size)}. Use extend() to add a whole sequence of messages."
            )
        dim = _positive_dim(dim, self.batch_dims)
        return self._replace(_grow(self, history, dim, many=False), inplace)

    def extend(self, history: History, *, inplace: bool = True, dim: int = 0) -> History:
        """Concatenates ``history`` to ``self`` along ``dim`` (both with the same number of dims).

        ``dim=0`` adds conversations (or messages, for a single chat); ``dim=-1`` on a
        batch adds several messages to each conversation.

        Args:
            history: a History with as many dims as ``self``.
            inplace: modify ``self`` (and return it); ``False`` returns a new History.
            dim: the dim to grow.

        Returns:
            The grown History.

        Examples:
            >>> h = History.from_chats([{"role": "user", "content": "1+1="}])
            >>> h.extend(History.from_chats([{"role": "assistant", "content": "2"}])).batch_size
            torch.Size([2])
        """
        if self.batch_dims == 0:
            raise RuntimeError(
                "Cannot extend a 0-dim History (a single message): call .unsqueeze(0) on it first."
            )
        if history.batch_dims != self.batch_dims:
            raise RuntimeError(
                f"The new history to extend must have as many dims as self: self has batch_size "
                f"{tuple(self.batch_size)}, the new one {tuple(history.batch_size)}. Use append() to add "
                "one message per conversation."
            )
        dim = _positive_dim(dim, self.batch_dims)
        return self._replace(_grow(self, history, dim, many=True), inplace)

    def _replace(self, new: History, inplace: bool) -> History:
        if not inplace:
            return new
        self.__dict__["_tensordict"] = new._tensordict
        return self


def _positive_dim(dim: int, ndim: int) -> int:
    if not -ndim <= dim < ndim:
        raise IndexError(f"dim {dim} is out of range for a History with {ndim} batch dims.")
    return dim % ndim


def _rows(history: History) -> list[History]:
    if history.batch_dims == 1:
        return [history]
    return [chat for row in history.unbind(0) for chat in _rows(row)]


def _stack(results: list[TensorDictBase]) -> TensorDictBase:
    shapes = [{k: v.shape for k, v in r.items()} for r in results]
    if all(s == shapes[0] for s in shapes):
        return torch.stack(results)
    return lazy_stack(results)


def _grow(history: History, other: History, dim: int, many: bool) -> History:
    if dim == 0:
        new = list(other.unbind(0)) if many else [other]
        return lazy_stack([*history.unbind(0), *new])
    rows, others = history.unbind(0), other.unbind(0)
    if len(rows) != len(others):
        raise RuntimeError(
            f"Cannot grow dim {dim}: self has {len(rows)} entries along dim 0, the new History {len(others)}; they must match."
        )
    return lazy_stack([_grow(a, b, dim - 1, many) for a, b in zip(rows, others, strict=True)])
