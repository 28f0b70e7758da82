"""TransformersWrapper: generate and score agree, padding never changes a result, errors are clear."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict, lazy_stack

from rl_llm import ChatHistory, History, TransformersWrapper
from rl_llm.tiny import tiny_causal_lm, tiny_tokenizer

CHATS = [
    [{"role": "user", "content": "1+1="}],
    [{"role": "system", "content": "Answer."}, {"role": "user", "content": "12+13="}],
    [{"role": "user", "content": "7*8="}],
]


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_causal_lm(tokenizer, n_positions=64, seed=1)


def _history_td(chats=CHATS):
    prompt = History.from_chats(chats)
    return TensorDict(
        history=ChatHistory(prompt=prompt, batch_size=(len(chats),)), batch_size=(len(chats),)
    )


def _reference_log_probs(model, ids: torch.Tensor) -> torch.Tensor:
    """Unpadded single-sequence log-probs: log p(ids[t] | ids[:t]), 0 at t=0."""
    with torch.no_grad():
        logits = model(input_ids=ids[None]).logits[0]
    picked = logits[:-1].log_softmax(-1).gather(-1, ids[1:, None]).squeeze(-1)
    return torch.cat([picked.new_zeros(1), picked])


@pytest.mark.parametrize("pad_output", [False, True])
def test_generate_log_probs_match_unpadded_reference(model, tokenizer, pad_output):
    torch.manual_seed(0)
    policy = TransformersWrapper(
        model, tokenizer=tokenizer, generate_kwargs={"max_new_tokens": 8}, pad_output=pad_output
    )
    td = policy(_history_td())
    for i in range(len(CHATS)):
        row = td[i]
        if pad_output:
            keep = row["masks", "all_attention_mask"]
            full, lp_full = row["tokens", "full"][keep], row["log_probs", "full"][keep]
            response = row["tokens", "response"][: int(row["masks", "all_assistant_mask"].sum())]
        else:
            full, lp_full, response = (
                row["tokens", "full"],
                row["log_probs", "full"],
                row["tokens", "response"],
            )
        n_prompt = full.numel() - response.numel()
        reference = _reference_log_probs(model, full)
        torch.testing.assert_close(lp_full[n_prompt:], reference[n_prompt:], atol=1e-5, rtol=1e-5)
        assert bool((lp_full[:n_prompt] == 0).all())


@pytest.mark.parametrize("pad_output", [False, True])
def test_score_mode_equals_generate_log_probs_and_has_gradients(model, tokenizer, pad_output):
    torch.manual_seed(1)
    policy = TransformersWrapper(
        model, tokenizer=tokenizer, generate_kwargs={"max_new_tokens": 8}, pad_output=pad_output
    )
    td = policy(_history_td())
    sampled = td.get(("log_probs", "full"), as_padded_tensor=True)
    scorer = TransformersWrapper(
        model, tokenizer=tokenizer, input_mode="tokens", generate=False, inplace=False
    )
    scored = scorer(td)
    current = scored.get(("log_probs", "full"), as_padded_tensor=True)
    assistant = td.get(("masks", "all_assistant_mask"), as_padded_tensor=True)
    torch.testing.assert_close(current[assistant], sampled[assistant], atol=1e-5, rtol=1e-5)
    model.zero_grad()
    current[assistant].sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)
    model.zero_grad()


def test_history_score_mode_masks_assistant_tokens(model, tokenizer):
    chats = [
        [
            {"role": "user", "content": "1+1="},
            {"role": "assistant", "content": "2"},
            {"role": "user", "content": "2+2="},
            {"role": "assistant", "content": "4"},
        ]
    ]
    td = TensorDict(
        history=ChatHistory(full=History.from_chats(chats), batch_size=(1,)), batch_size=(1,)
    )
    scorer = TransformersWrapper(model, tokenizer=tokenizer, generate=False)
    td = scorer(td)
    tokens = td.get(("tokens", "full"), as_list=True)[0]
    mask = td.get(("masks", "all_assistant_mask"), as_list=True)[0]
    assert tokenizer.decode(tokens[mask]) == "2<|im_end|>4<|im_end|>"
    lp = td.get(("log_probs", "full"), as_list=True)[0]
    torch.testing.assert_close(
        lp.detach(), _reference_log_probs(model, tokens), atol=1e-5, rtol=1e-5
    )


def test_left_padding_does_not_change_greedy_replies(model, tokenizer):
    greedy = {"max_new_tokens": 6, "do_sample": False}
    batched = TransformersWrapper(model, tokenizer=tokenizer, generate_kwargs=greedy)(_history_td())
    for i, chat in enumerate(CHATS):
        alone = TransformersWrapper(model, tokenizer=tokenizer, generate_kwargs=greedy)(
            _history_td([chat])
        )
        torch.testing.assert_close(
            batched.get(("tokens", "response"), as_list=True)[i],
            alone.get(("tokens", "response"), as_list=True)[0],
        )
        torch.testing.assert_close(
            batched.get(("log_probs", "response"), as_list=True)[i],
            alone.get(("log_probs", "response"), as_list=True)[0],
            atol=1e-5,
            rtol=1e-5,
        )


def test_history_reply_parsed_into_a_message(model, tokenizer):
    torch.manual_seed(2)
    # an untrained model may emit <|im_start|>, which opens a new message: keep to one message here
    start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    policy = TransformersWrapper(
        model,
        tokenizer=tokenizer,
        generate_kwargs={"max_new_tokens": 8, "suppress_tokens": [start]},
    )
    td = policy(_history_td())
    for i, chat in enumerate(CHATS):
        response = td.get(("tokens", "response"), as_list=True)[i]
        text = tokenizer.decode(response)
        assert td["text", "response"][i] == text
        assert td["text", "full"][i] == td["text", "prompt"][i] + text
        reply = td["history", "response"][i]
        ended = bool(response[-1] == tokenizer.eos_token_id)
        assert reply.role == ["assistant"]
        assert reply.content == [text.removesuffix("<|im_end|>")]
        assert reply.is_complete.tolist() == [ended]
        full = td["history", "full"][i]
        assert full.content == [m["content"] for m in chat] + reply.content


def test_eos_ends_the_reply(model, tokenizer):
    torch.manual_seed(4)
    eos, max_new = tokenizer.eos_token_id, 20
    policy = TransformersWrapper(
        model, tokenizer=tokenizer, generate_kwargs={"max_new_tokens": max_new}
    )
    td = policy(_history_td(CHATS * 10))
    ended = 0
    for r, lp in zip(
        td.get(("tokens", "response"), as_list=True),
        td.get(("log_probs", "response"), as_list=True),
        strict=True,
    ):
        assert r.shape == lp.shape
        assert eos not in r[:-1].tolist()  # nothing after the first eos (no padding kept)
        assert r.numel() == max_new or r[-1] == eos
        ended += int(r[-1] == eos)
    assert 0 < ended < 30  # the seeded draw holds both kinds of reply


@pytest.mark.parametrize("mode", ["text", "tokens"])
def test_text_and_token_inputs(model, tokenizer, mode):
    prompts = ["<|im_start|>user\n1+1=<|im_end|>\n<|im_start|>assistant\n", "hello"]
    if mode == "text":
        td = TensorDict(text={"prompt": prompts}, batch_size=(2,))
    else:
        ids = [torch.tensor(tokenizer(p)["input_ids"]) for p in prompts]
        td = lazy_stack([TensorDict(tokens={"prompt": i}) for i in ids])
    torch.manual_seed(3)
    policy = TransformersWrapper(
        model, tokenizer=tokenizer, input_mode=mode, generate_kwargs={"max_new_tokens": 4}
    )
    td = policy(td)
    for i, p in enumerate(prompts):
        assert tokenizer.decode(td.get(("tokens", "prompt"), as_list=True)[i]) == p
        assert td["text", "full"][i].startswith(p)
    assert "history" not in td


def test_errors(model, tokenizer):
    with pytest.raises(ValueError, match="no pad token"):
        TransformersWrapper(model, tokenizer=tiny_tokenizer(pad_token=None))
    with pytest.raises(ValueError, match="context holds 64"):
        TransformersWrapper(model, tokenizer=tokenizer, generate_kwargs={"max_new_tokens": 60})(
            _history_td()
        )
    scorer = TransformersWrapper(model, tokenizer=tokenizer, input_mode="tokens", generate=False)
    with pytest.raises(ValueError, match="context holds 64"):
        scorer.score(torch.ones(1, 65, dtype=torch.long), torch.ones(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match="Empty prompt"):
        TransformersWrapper(model, tokenizer=tokenizer, input_mode="text")(
            TensorDict(text={"prompt": ["1+1=", ""]}, batch_size=(2,))
        )
    with pytest.raises(KeyError, match=r"\('history', 'prompt'\)"):
        TransformersWrapper(model, tokenizer=tokenizer)(TensorDict(batch_size=(1,)))
    with pytest.raises(ValueError, match="GenerationConfig"):
        TransformersWrapper(model, tokenizer=tokenizer, generate_kwargs={"max_tokens": 3})
    with pytest.raises(ValueError, match="input_mode"):
        TransformersWrapper(model, tokenizer=tokenizer, input_mode="chat")


def test_torchrl_keywords_return_log_probs_and_device(model, tokenizer):
    # TorchRL's keyword set: return_log_probs / device are accepted, with TorchRL's meaning
    policy = TransformersWrapper(
        model,
        tokenizer=tokenizer,
        input_mode="history",
        generate=True,
        return_log_probs=False,
        device="cpu",
        generate_kwargs={"max_new_tokens": 3},
    )
    assert "log_probs" not in policy.out_keys
    out = policy(_history_td())
    assert "log_probs" not in out and ("tokens", "response") in out.keys(True)
    assert out["tokens"].device == torch.device("cpu")
    default = TransformersWrapper(model, tokenizer=tokenizer, generate_kwargs={"max_new_tokens": 3})
    assert default.return_log_probs and "log_probs" in default.out_keys
    with pytest.raises(ValueError, match="return_log_probs must be True when generate=False"):
        TransformersWrapper(model, tokenizer=tokenizer, generate=False, return_log_probs=False)


def test_model_and_tokenizer_by_path(model, tokenizer, tmp_path):
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    policy = TransformersWrapper(str(tmp_path), generate_kwargs={"max_new_tokens": 2})
    assert policy.tokenizer.pad_token_id == tokenizer.pad_token_id
    assert policy(_history_td())["tokens", "response"] is not None
