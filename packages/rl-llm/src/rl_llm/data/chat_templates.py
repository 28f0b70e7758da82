"""Chat templates known by name, and the parsers that turn rendered text back into messages.

A chat template (Jinja, as in ``transformers``) renders a list of messages into
text; its *inverse parser* reads such text back into ``(role, content,
is_complete)`` triples. ``History.from_text`` needs the inverse, so a template is
usable for generation only if the pair round-trips: parsing a rendered
conversation gives the same messages back. :func:`check_round_trip` proves it
on a probe conversation and names the first message that differs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Message = tuple[str, str, bool]
"""One parsed message: ``(role, content, is_complete)``."""

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['role'] == 'assistant' %}"
    "{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{% else %}"
    "{{ message['content'] + '<|im_end|>' }}"
    "{% endif %}"
    "{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""ChatML with ``{% generation %}`` marks around each assistant message and its end token.

The marks let ``apply_chat_template(..., return_assistant_tokens_mask=True)``
tell which tokens the assistant produced. The end token ``<|im_end|>`` is inside
the assistant's span so that a model trained on the mask learns to stop.
"""

_CHATML_BLOCK = re.compile(
    r"<\|im_start\|>([^\n]*)\n(.*?)(?:(<\|im_end\|>|<\|endoftext\|>)|(?=<\|im_start\|>)|\Z)",
    flags=re.DOTALL,
)


def parse_chatml(text: str) -> list[Message]:
    """Parses ChatML text into messages; a block without its end token is incomplete.

    Args:
        text: rendered ChatML, possibly ending in an unfinished assistant message.

    Returns:
        The ``(role, content, is_complete)`` triples in order.

    Examples:
        >>> parse_chatml("<|im_start|>user\\n1+1=<|im_end|>\\n<|im_start|>assistant\\n2")
        [('user', '1+1=', True), ('assistant', '2', False)]
    """
    return [(m.group(1), m.group(2), m.group(3) is not None) for m in _CHATML_BLOCK.finditer(text)]


# Qwen's chat models (Qwen2 / Qwen2.5) speak ChatML: "qwen" names the same format, as in TorchRL.
_TEMPLATES: dict[str, str] = {"chatml_format": CHATML_TEMPLATE, "qwen": CHATML_TEMPLATE}
_PARSERS: dict[str, Callable[[str], list[Message]]] = {
    "chatml_format": parse_chatml,
    "qwen": parse_chatml,
}
_CHECKED: set[tuple[str, str]] = set()

_PROBE = (
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+3?"},
    {"role": "assistant", "content": "5"},
    {"role": "user", "content": "And 4*2?\nThanks."},
)


def add_chat_template(
    template_name: str, template: str, inverse_parser: Callable[[str], list[Message]]
) -> None:
    """Registers a chat template under a name, with the parser that inverts it.

    Args:
        template_name: the name to pass as ``chat_template_name``.
        template: the Jinja template (mark assistant text with ``{% generation %}``
            to get assistant-token masks).
        inverse_parser: a function from rendered text to ``(role, content, is_complete)``
            triples.

    Examples:
        >>> add_chat_template("chatml_copy", CHATML_TEMPLATE, parse_chatml)
        >>> "chatml_copy" in chat_template_names()
        True
    """
    if not callable(inverse_parser):
        raise TypeError(
            f"inverse_parser must be callable (text -> list of (role, content, is_complete)), got {inverse_parser!r}."
        )
    _TEMPLATES[template_name] = template
    _PARSERS[template_name] = inverse_parser


def chat_template_names() -> list[str]:
    """The names of the registered chat templates, in registration order."""
    return list(_TEMPLATES)


def get_chat_template(template_name: str) -> str:
    """The Jinja template registered as ``template_name``."""
    try:
        return _TEMPLATES[template_name]
    except KeyError:
        raise KeyError(
            f"Unknown chat_template_name {template_name!r}; known: {chat_template_names()}. "
            "Register one with rl_llm.add_chat_template(name, template, inverse_parser)."
        ) from None


def get_inverse_parser(template_name: str) -> Callable[[str], list[Message]]:
    """The parser registered for ``template_name``."""
    get_chat_template(template_name)
    return _PARSERS[template_name]


def template_name_of(template: str | None) -> str | None:
    """The registered name of ``template`` (exact text match), or ``None``."""
    for name, known in _TEMPLATES.items():
        if known == template:
            return name
    return None


def check_round_trip(tokenizer: Any, template_name: str, chat_template: str | None = None) -> None:
    """Checks that ``template_name``'s parser inverts the template the tokenizer renders with.

    A probe conversation (system, user, assistant, multi-line user) is rendered
    with ``chat_template`` (default: the tokenizer's own template) and parsed
    back; every role and content must come back unchanged. Passing checks are
    cached per (template, parser).

    Args:
        tokenizer: a ``transformers`` tokenizer.
        template_name: the registered parser to check.
        chat_template: the template to render with; ``None`` uses ``tokenizer.chat_template``.

    Raises:
        ValueError: if the rendered probe does not parse back to the same messages.
    """
    template = (
        chat_template if chat_template is not None else getattr(tokenizer, "chat_template", None)
    )
    if template is None:
        raise ValueError(
            "The tokenizer has no chat template and none was given: set tokenizer.chat_template, pass "
            "chat_template=..., or chat_template_name='chatml_format'."
        )
    key = (template, template_name)
    if key in _CHECKED:
        return
    parser = get_inverse_parser(template_name)
    rendered = tokenizer.apply_chat_template(
        list(_PROBE), chat_template=template, tokenize=False, add_generation_prompt=False
    )
    parsed = parser(rendered)
    expected = [(m["role"], m["content"]) for m in _PROBE]
    got = [(role, content) for role, content, _ in parsed]
    if got != expected:
        diff = next(
            (i for i, (e, g) in enumerate(zip(expected, got, strict=False)) if e != g),
            min(len(expected), len(got)),
        )
        raise ValueError(
            f"The chat template does not round-trip through the {template_name!r} parser: message {diff} of a probe "
            f"conversation was rendered as {rendered!r} and parsed back as {got[diff : diff + 1] or 'nothing'} instead of "
            f"{expected[diff : diff + 1] or 'nothing'}. Use a template the parser inverts (e.g. chat_template_name="
            "'chatml_format'), or register your template with its own parser via rl_llm.add_chat_template."
        )
    _CHECKED.add(key)
