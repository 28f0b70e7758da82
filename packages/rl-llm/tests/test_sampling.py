"""The KV-cache decoder: greedy equals ``generate``, sampled log-probs equal scores, warpers match."""

from __future__ import annotations

import pytest
import torch
from transformers import GenerationConfig
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from rl_llm import TransformersWrapper
from rl_llm.modules._sampling import decode, warp_logits
from rl_llm.modules.base import pad_left
from rl_llm.tiny import tiny_causal_lm, tiny_tokenizer

PROMPTS = ["1+1=", "12+13=", "7*8=", "1+1=", "a", "12+13="]  # repeats: the shared-prefix path
DISTINCT = ["7*8=", "12+13=", "1+1="]  # no repeat, not in sorted order


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_causal_lm(tokenizer, n_positions=64, seed=3)


def _batch(tokenizer, prompts=PROMPTS):
    rows = [torch.tensor(tokenizer(p)["input_ids"]) for p in prompts]
    return pad_left(rows, tokenizer.pad_token_id)


def _generate(model, ids, mask, *, eos, pad, n):
    config = GenerationConfig(max_new_tokens=n, do_sample=False, eos_token_id=eos, pad_token_id=pad)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    return out[:, ids.shape[1] :]


@pytest.mark.parametrize("n", [1, 6])
def test_greedy_reproduces_generate(model, tokenizer, n):
    ids, mask = _batch(tokenizer)
    pad = tokenizer.pad_token_id
    expected = _generate(model, ids, mask, eos=tokenizer.eos_token_id, pad=pad, n=n)
    replies, _ = decode(
        model,
        ids,
        mask,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=pad,
        max_new_tokens=n,
        do_sample=False,
    )
    assert torch.equal(replies, expected)


def test_greedy_eos_and_padding_match_generate(model, tokenizer):
    ids, mask = _batch(tokenizer)
    pad = tokenizer.pad_token_id
    free = _generate(model, ids, mask, eos=tokenizer.eos_token_id, pad=pad, n=6)
    eos = int(free[0, 2])  # a token row 0 emits third: that row stops there, the others go on
    expected = _generate(model, ids, mask, eos=eos, pad=pad, n=6)
    replies, _ = decode(
        model, ids, mask, eos_token_id=eos, pad_token_id=pad, max_new_tokens=6, do_sample=False
    )
    assert torch.equal(replies, expected)
    assert bool((replies[0, 3:] == pad).all())


def _reference_log_probs(model, prompt: torch.Tensor, reply: torch.Tensor) -> torch.Tensor:
    """log p(reply[t] | prompt, reply[:t]) from one unpadded, uncached forward."""
    ids = torch.cat([prompt, reply])
    with torch.no_grad():
        logits = model(input_ids=ids[None]).logits[0, prompt.numel() - 1 : -1]
    return logits.log_softmax(-1).gather(-1, reply[:, None]).squeeze(-1)


@pytest.mark.parametrize(
    "settings",
    [{}, {"temperature": 0.7, "top_k": 5}, {"top_p": 0.8}, {"do_sample": False}],
)
@pytest.mark.parametrize("prompts", [PROMPTS, DISTINCT])
def test_sampled_log_probs_equal_the_unmodified_model(model, tokenizer, settings, prompts):
    torch.manual_seed(0)
    ids, mask = _batch(tokenizer, prompts)
    replies, log_probs = decode(
        model,
        ids,
        mask,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        max_new_tokens=6,
        **settings,
    )
    for i in range(len(prompts)):
        prompt = ids[i][mask[i].bool()]
        is_eos = (replies[i] == tokenizer.eos_token_id).nonzero()
        n = int(is_eos[0]) + 1 if len(is_eos) else replies.shape[1]
        reference = _reference_log_probs(model, prompt, replies[i, :n])
        torch.testing.assert_close(log_probs[i, :n], reference, atol=1e-5, rtol=1e-5)


def test_wrapper_cache_log_probs_equal_score_mode(model, tokenizer):
    torch.manual_seed(1)
    sampler = TransformersWrapper(
        model,
        tokenizer=tokenizer,
        input_mode="text",
        decoder="cache",
        generate_kwargs={"max_new_tokens": 6, "temperature": 0.8, "top_p": 0.9},
        pad_output=True,
    )
    from tensordict import TensorDict

    td = sampler(TensorDict(text={"prompt": PROMPTS}, batch_size=(len(PROMPTS),)))
    scorer = TransformersWrapper(
        model, tokenizer=tokenizer, input_mode="tokens", generate=False, inplace=False
    )
    scored = scorer(td)["log_probs", "full"]
    keep = td["masks", "all_assistant_mask"]
    torch.testing.assert_close(
        td["log_probs", "full"][keep], scored[keep].detach(), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize(
    "settings",
    [
        {"temperature": 0.5},
        {"top_k": 3},
        {"top_p": 0.6},
        {"temperature": 1.7, "top_k": 10, "top_p": 0.9},
    ],
)
def test_warp_logits_matches_transformers_warpers(settings):
    logits = torch.randn(8, 50, generator=torch.Generator().manual_seed(0)) * 3
    reference = logits.clone()
    if "temperature" in settings:
        reference = TemperatureLogitsWarper(settings["temperature"])(None, reference)
    if "top_k" in settings:
        reference = TopKLogitsWarper(settings["top_k"])(None, reference)
    if "top_p" in settings:
        reference = TopPLogitsWarper(settings["top_p"])(None, reference)
    torch.testing.assert_close(warp_logits(logits, **settings), reference)


def test_sampling_frequencies_follow_the_warped_distribution(model, tokenizer):
    """4000 one-token replies to one prompt: frequencies match softmax(logits / T) over the top 3."""
    torch.manual_seed(2)
    ids = torch.tensor([tokenizer("1+1=")["input_ids"]] * 4000)
    replies, _ = decode(
        model,
        ids,
        torch.ones_like(ids),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        max_new_tokens=1,
        temperature=0.5,
        top_k=3,
    )
    with torch.no_grad():
        logits = model(input_ids=ids[:1]).logits[0, -1]
    top = logits.topk(3)
    expected = (top.values / 0.5).softmax(-1)
    counts = torch.stack([(replies[:, 0] == t).float().mean() for t in top.indices])
    assert float(counts.sum()) == 1.0  # nothing outside the top 3
    torch.testing.assert_close(counts, expected, atol=0.03, rtol=0)


def test_decoder_choice_and_errors(model, tokenizer):
    auto = TransformersWrapper(model, tokenizer=tokenizer, generate_kwargs={"max_new_tokens": 2})
    assert auto.decoder == "cache"
    beams = TransformersWrapper(
        model,
        tokenizer=tokenizer,
        generate_kwargs={"max_new_tokens": 2, "num_beams": 2, "do_sample": False},
    )
    assert beams.decoder == "generate"
    with pytest.raises(ValueError, match="decoder='generate'"):
        TransformersWrapper(
            model, tokenizer=tokenizer, decoder="cache", generate_kwargs={"repetition_penalty": 1.2}
        )
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        TransformersWrapper(model, tokenizer=tokenizer, generate_kwargs={"max_new_tokens": 0})
    with pytest.raises(ValueError, match="top_p must be in"):
        TransformersWrapper(model, tokenizer=tokenizer, generate_kwargs={"top_p": 0.0})
    with pytest.raises(ValueError, match="decoder must be"):
        TransformersWrapper(model, tokenizer=tokenizer, decoder="vllm")
