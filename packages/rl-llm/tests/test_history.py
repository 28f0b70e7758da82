"""History: construction, stacking, templates, assistant masks, parsing round trips, growth."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_llm import History
from rl_llm.data.chat_templates import CHATML_TEMPLATE, add_chat_template, parse_chatml
from rl_llm.tiny import tiny_tokenizer

CHAT_A = [
    {"role": "system", "content": "Answer with a number."},
    {"role": "user", "content": "12+7="},
    {"role": "assistant", "content": "19"},
    {"role": "user", "content": "3*4=\nplease"},
    {"role": "assistant", "content": "12"},
]
CHAT_B = [{"role": "user", "content": "2+2="}, {"role": "assistant", "content": "4"}]


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def _chatml(messages, generation_prompt=False):
    """Independent ChatML rendering (plain string formatting)."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + ("<|im_start|>assistant\n" if generation_prompt else "")


def test_from_chats_shapes_and_fields():
    one = History.from_chats(CHAT_B)
    assert one.batch_size == (2,)
    assert one.role == ["user", "assistant"] and one.content == ["2+2=", "4"]
    ragged = History.from_chats([CHAT_A, CHAT_B])
    assert ragged.batch_size == (2, -1)
    assert ragged[0].content == [m["content"] for m in CHAT_A]
    assert ragged[1].role == ["user", "assistant"]
    dense = History.from_chats([CHAT_B, CHAT_B])
    assert dense.batch_size == (2, 2)
    assert dense[:, 1].content == ["4", "4"]


def test_stack_index_and_nest_in_tensordict():
    h = History.from_chats([CHAT_A, CHAT_B])
    stacked = torch.stack([h, h])
    assert stacked.batch_size[:2] == (2, 2)
    assert stacked[1, 0].content == [m["content"] for m in CHAT_A]
    td = TensorDict(history=h, batch_size=(2,))
    assert td[1]["history"].content == ["2+2=", "4"]
    assert isinstance(td["history"], History)
    assert h[0, 2].role == "assistant"


@pytest.mark.parametrize(
    "bad, error, match",
    [
        ([], ValueError, "empty"),
        ([[]], ValueError, r"chats\[0\] is empty"),
        ([{"role": "user"}], KeyError, "content"),
        ([{"role": "user", "content": 3}], TypeError, "must be a str"),
        (["hello"], TypeError, "must be a list of message dicts"),
    ],
)
def test_from_chats_errors(bad, error, match):
    with pytest.raises(error, match=match):
        History.from_chats(bad)


@pytest.mark.parametrize("generation_prompt", [True, False])
def test_apply_chat_template_text_matches_plain_chatml(tokenizer, generation_prompt):
    h = History.from_chats([CHAT_A, CHAT_B])
    texts = h.apply_chat_template(tokenizer=tokenizer, add_generation_prompt=generation_prompt)
    assert texts == [_chatml(CHAT_A, generation_prompt), _chatml(CHAT_B, generation_prompt)]
    single = h[1].apply_chat_template(tokenizer=tokenizer, add_generation_prompt=generation_prompt)
    assert single == _chatml(CHAT_B, generation_prompt)


def test_placeholder_role_is_dropped(tokenizer):
    h = History.from_chats([{"role": "<none>", "content": ""}, *CHAT_B])
    assert h.apply_chat_template(tokenizer=tokenizer) == _chatml(CHAT_B, True)


def _reference_assistant_mask(tokenizer, messages):
    """Mask built from character spans of assistant contents + their end token."""
    text = _chatml(messages)
    spans, cursor = [], 0
    for m in messages:
        header = f"<|im_start|>{m['role']}\n"
        start = text.index(header, cursor) + len(header)
        end = start + len(m["content"]) + len("<|im_end|>")
        if m["role"] == "assistant":
            spans.append((start, end))
        cursor = end
    enc = tokenizer(text, return_offsets_mapping=True)
    return torch.tensor(
        [int(any(s <= a and b <= e for s, e in spans)) for a, b in enc["offset_mapping"]]
    ), torch.tensor(enc["input_ids"])


def test_assistant_masks_cover_assistant_content_and_end_token(tokenizer):
    h = History.from_chats(CHAT_A)
    out = h.apply_chat_template(
        tokenizer=tokenizer, add_generation_prompt=False, return_assistant_tokens_mask=True
    )
    expected_mask, expected_ids = _reference_assistant_mask(tokenizer, CHAT_A)
    torch.testing.assert_close(out["input_ids"], expected_ids)
    torch.testing.assert_close(out["assistant_masks"].long(), expected_mask)
    masked = tokenizer.decode(out["input_ids"][out["assistant_masks"].bool()])
    assert masked == "19<|im_end|>12<|im_end|>"


def test_batched_masks_ragged_and_left_padded(tokenizer):
    h = History.from_chats([CHAT_A, CHAT_B])
    ragged = h.apply_chat_template(
        tokenizer=tokenizer, add_generation_prompt=False, return_assistant_tokens_mask=True
    )
    padded = h.apply_chat_template(
        tokenizer=tokenizer,
        add_generation_prompt=False,
        return_assistant_tokens_mask=True,
        padding=True,
    )
    assert padded.batch_size == (2,)
    for i, chat in enumerate((CHAT_A, CHAT_B)):
        mask, ids = _reference_assistant_mask(tokenizer, chat)
        torch.testing.assert_close(ragged[i]["input_ids"], ids)
        torch.testing.assert_close(ragged[i]["assistant_masks"].long(), mask)
        n_pad = padded["input_ids"].shape[-1] - ids.numel()
        # left padding: the conversation is right-aligned, the mask moves with it
        torch.testing.assert_close(padded[i]["input_ids"][n_pad:], ids)
        torch.testing.assert_close(padded[i]["assistant_masks"][n_pad:].long(), mask)
        assert padded[i]["attention_mask"][:n_pad].sum() == 0
        assert bool(padded[i]["attention_mask"][n_pad:].all())


def test_masks_need_generation_blocks(tokenizer):
    plain = CHATML_TEMPLATE.replace("{% generation %}", "").replace("{% endgeneration %}", "")
    with pytest.raises(ValueError, match="generation"):
        History.from_chats(CHAT_B).apply_chat_template(
            tokenizer=tokenizer, chat_template=plain, return_assistant_tokens_mask=True
        )


def test_tokenizer_without_template_falls_back_to_chatml():
    tok = tiny_tokenizer(chat_template=None)
    assert History.from_chats(CHAT_B).apply_chat_template(tokenizer=tok) == _chatml(CHAT_B, True)


def test_from_text_round_trip(tokenizer):
    h = History.from_chats([CHAT_A, CHAT_B])
    texts = h.apply_chat_template(tokenizer=tokenizer, add_generation_prompt=False)
    back = History.from_text(texts, tokenizer=tokenizer)
    assert back.batch_size == (2, -1)
    assert back[0].role == h[0].role and back[0].content == h[0].content
    assert back[1].content == h[1].content
    assert bool(back[0].is_complete.all())


def test_from_text_reply_incomplete_and_complete(tokenizer):
    prompt = History.from_chats(CHAT_B[:1]).apply_chat_template(tokenizer=tokenizer)
    cut = History.from_text(prompt + "1", tokenizer=tokenizer)
    assert cut.role == ["user", "assistant"] and cut.content == ["2+2=", "1"]
    assert cut.is_complete.tolist() == [True, False]
    done = History.from_text(prompt + "4<|im_end|>", tokenizer=tokenizer)
    assert done.is_complete.tolist() == [True, True] and done.content[-1] == "4"


def test_from_text_errors(tokenizer):
    with pytest.raises(ValueError, match="No message found"):
        History.from_text("just text, no markers")
    # a template that renders roles differently does not round-trip through the ChatML parser
    odd = "{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\\n' }}{% endfor %}"
    with pytest.raises(ValueError, match="does not round-trip"):
        History.from_text("user: hi\n", chat_template=odd, tokenizer=tokenizer)


def test_registered_template_with_its_parser(tokenizer):
    template = "{% for m in messages %}{{ '[' + m['role'] + ']' + m['content'] + '|' }}{% endfor %}"

    def parse(text):
        out = []
        for block in text.split("|"):
            if block:
                role, content = block[1:].split("]", 1)
                out.append((role, content, True))
        return out

    add_chat_template("brackets_test", template, parse)
    h = History.from_chats(CHAT_B)
    text = h.apply_chat_template(
        tokenizer=tokenizer, chat_template_name="brackets_test", add_generation_prompt=False
    )
    assert text == "[user]2+2=|[assistant]4|"
    back = History.from_text(
        text, chat_template_name="brackets_test", chat_template=template, tokenizer=tokenizer
    )
    assert back.content == h.content


def test_parse_chatml_multiline_and_consecutive_blocks():
    text = "<|im_start|>user\na\nb<|im_end|><|im_start|>assistant\nc"
    assert parse_chatml(text) == [("user", "a\nb", True), ("assistant", "c", False)]


def test_append_single_chat_and_batch():
    one = History.from_chats(CHAT_B[:1])
    out = one.append(History(role="assistant", content="4"))
    assert out is one and one.role == ["user", "assistant"]
    batch = History.from_chats([CHAT_A, CHAT_B])
    grown = batch.append(
        History(role=["user", "user"], content=["more", "again"], batch_size=(2,)), inplace=False
    )
    assert grown[0].content[-1] == "more" and grown[1].content == ["2+2=", "4", "again"]
    assert batch[1].content == ["2+2=", "4"]  # inplace=False leaves self alone


def test_extend_messages_and_conversations():
    batch = History.from_chats([CHAT_B, CHAT_B])
    extra = History.from_chats(
        [[{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]] * 2
    )
    batch.extend(extra, dim=-1)
    assert batch[0].content == ["2+2=", "4", "x", "y"]
    more = batch.extend(History.from_chats([CHAT_A]), inplace=False, dim=0)
    assert more.batch_size[0] == 3 and more[2].content[0] == CHAT_A[0]["content"]


def test_growth_errors():
    one = History.from_chats(CHAT_B)
    with pytest.raises(RuntimeError, match="0-dim"):
        one[0].append(History(role="user", content="x"))
    with pytest.raises(RuntimeError, match="one dim less"):
        one.append(History.from_chats(CHAT_B))
    with pytest.raises(RuntimeError, match="The new history to extend must have as many dims"):
        one.extend(History(role="user", content="x"))
    batch = History.from_chats([CHAT_B, CHAT_B])
    with pytest.raises(RuntimeError, match="must match"):
        batch.append(History(role=["u"] * 3, content=["x"] * 3, batch_size=(3,)))


def test_empty_conversation_cannot_be_rendered(tokenizer):
    h = History.from_chats([{"role": "<none>", "content": ""}])
    with pytest.raises(ValueError, match="empty prompt"):
        h.apply_chat_template(tokenizer=tokenizer)


def test_qwen_template_name_parses_chatml_completion_flags():
    # TorchRL's name for Qwen's ChatML format; a message without its end token is incomplete
    text = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHel"
    history = History.from_text(text, chat_template_name="qwen")
    assert history.role == ["user", "assistant"]
    assert history.is_complete.tolist() == [True, False]
