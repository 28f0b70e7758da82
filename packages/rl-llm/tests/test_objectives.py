"""GRPO / SFT losses and group-relative advantages vs plain-torch references on fixed tensors."""

from __future__ import annotations

import statistics

import pytest
import torch
from tensordict import TensorDict, lazy_stack

from rl_llm import ChatHistory, GRPOLoss, History, MCAdvantage, SFTLoss, TransformersWrapper
from rl_llm.objectives import (
    aggregate,
    clipped_surrogate,
    group_relative_advantage,
    k3_kl_token_estimate,
    kl_k3,
)
from rl_llm.tiny import tiny_causal_lm, tiny_tokenizer

PROMPTS = [
    [{"role": "user", "content": "1+1="}],
    [{"role": "system", "content": "Answer."}, {"role": "user", "content": "12+13="}],
    [{"role": "user", "content": "7*8="}],
    [{"role": "user", "content": "0+0="}],
]


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_causal_lm(tokenizer, n_positions=64, seed=2)


# ---- functional ---------------------------------------------------------------------------
def _rand_mask(shape, seed):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(shape, generator=g) > 0.3
    mask[:, 0] = True
    return mask, torch.randn(shape, generator=g)


def test_aggregate_modes_vs_loops():
    mask, value = _rand_mask((4, 7), 0)
    rows = [[value[i, t].item() for t in range(7) if mask[i, t]] for i in range(4)]
    flat = [x for r in rows for x in r]
    torch.testing.assert_close(
        aggregate(value, mask, "token_mean"), torch.tensor(sum(flat) / len(flat))
    )
    torch.testing.assert_close(
        aggregate(value, mask, "prompt_mean"),
        torch.tensor(statistics.mean(sum(r) / len(r) for r in rows)),
    )
    torch.testing.assert_close(
        aggregate(value, mask, "constant_mean", max_tokens=10),
        torch.tensor(statistics.mean(sum(r) / 10 for r in rows)),
    )
    torch.testing.assert_close(
        aggregate(value, mask, "constant_mean"),
        torch.tensor(statistics.mean(sum(r) / 7 for r in rows)),
    )
    none = aggregate(value, mask, "none")
    assert torch.equal(none[~mask], torch.zeros(int((~mask).sum()))) and torch.equal(
        none[mask], value[mask]
    )
    with pytest.raises(ValueError, match="aggregation"):
        aggregate(value, mask, "mean")


def test_clipped_surrogate_vs_scalar_formula():
    g = torch.Generator().manual_seed(1)
    lp, old, adv = (
        torch.randn(50, generator=g) * 0.3,
        torch.randn(50, generator=g) * 0.3,
        torch.randn(50, generator=g),
    )
    loss, log_weight, clipped = clipped_surrogate(lp, old, adv, 0.2, 0.28)
    for i in range(50):
        r = float(torch.exp(lp[i] - old[i]))
        c = min(max(r, 0.8), 1.28)
        assert loss[i].item() == pytest.approx(
            -min(r * adv[i].item(), c * adv[i].item()), rel=1e-5, abs=1e-6
        )
        assert bool(clipped[i]) == (c != r)
    torch.testing.assert_close(log_weight, lp - old)


def test_kl_k3_and_group_advantage():
    lp, ref = torch.tensor([-1.0, -2.0, -0.5]), torch.tensor([-1.5, -2.0, -0.1])
    expected = [float(torch.exp(r - x) - (r - x) - 1) for x, r in zip(lp, ref, strict=True)]
    torch.testing.assert_close(kl_k3(lp, ref), torch.tensor(expected))
    returns = torch.tensor([[1.0, 0.0, 0.0, 1.0, 1.0], [0.5, 0.5, 2.0, 0.0, 1.0]])
    for row, adv, centred in zip(
        returns,
        group_relative_advantage(returns, eps=0.0),
        group_relative_advantage(returns, scale=False),
        strict=True,
    ):
        m, s = statistics.mean(row.tolist()), statistics.stdev(row.tolist())
        torch.testing.assert_close(adv, torch.tensor([(x - m) / s for x in row.tolist()]))
        torch.testing.assert_close(centred, torch.tensor([x - m for x in row.tolist()]))


# ---- GRPOLoss -----------------------------------------------------------------------------
def _reference_log_probs(model, ids):
    logits = model(input_ids=ids[None]).logits[0]
    picked = logits[:-1].log_softmax(-1).gather(-1, ids[1:, None]).squeeze(-1)
    entropy = -(logits[:-1].softmax(-1) * logits[:-1].log_softmax(-1)).sum(-1)
    return torch.cat([picked.new_zeros(1), picked]), torch.cat([entropy.new_zeros(1), entropy])


def _sampled_batch(model, tokenizer, pad_output, seed=0):
    torch.manual_seed(seed)
    policy = TransformersWrapper(
        model, tokenizer=tokenizer, generate_kwargs={"max_new_tokens": 6}, pad_output=pad_output
    )
    prompt = History.from_chats(PROMPTS)
    td = TensorDict(history=ChatHistory(prompt=prompt, batch_size=(4,)), batch_size=(4,))
    td = policy(td)
    td["advantage"] = torch.tensor([[1.0], [-0.5], [2.0], [-1.5]])
    # pretend the sampling policy was slightly different, so that ratios move away from 1
    g = torch.Generator().manual_seed(seed + 1)
    if pad_output:
        td["log_probs", "full"] = td["log_probs", "full"] + 0.3 * torch.randn(
            td["log_probs", "full"].shape, generator=g
        )
    else:
        rows = td.get(("log_probs", "full"), as_list=True)
        for i, r in enumerate(rows):
            td[i]["log_probs"].full = r + 0.3 * torch.randn(r.shape, generator=g)
    return td


def _rows(td, key):
    """Unpadded rows of ``td[key]`` in either layout."""
    try:
        value = td.get(key)
        if isinstance(value, torch.Tensor) and value.ndim == 2:
            mask = td.get(("masks", "all_attention_mask"))
            return [v[m] for v, m in zip(value, mask, strict=True)]
    except RuntimeError:
        pass
    return list(td.get(key, as_list=True))


def _reference_grpo(model, td, aggregation, eps_low, eps_high, kl_coeff, ref_rows, entropy_coeff):
    """Per-sequence loop over unpadded rows, response tokens only."""
    fulls = _rows(td, ("tokens", "full"))
    olds = _rows(td, ("log_probs", "full"))
    n_prompts = [int((~m).sum()) for m in _rows(td, ("masks", "all_assistant_mask"))]
    per_seq_losses, per_seq_ent, per_seq_kl, all_tok, all_ent, all_kl = [], [], [], [], [], []
    width = max(f.numel() for f in fulls)
    for i, (full, old) in enumerate(zip(fulls, olds, strict=True)):
        lp, ent = _reference_log_probs(model, full)
        a = float(td["advantage"][i])
        losses, ents, kls = [], [], []
        for t in range(n_prompts[i], full.numel()):
            r = torch.exp(lp[t] - old[t])
            losses.append(-torch.minimum(r * a, r.clamp(1 - eps_low, 1 + eps_high) * a))
            ents.append(ent[t])
            if kl_coeff is not None:
                d = ref_rows[i][t] - lp[t]
                kls.append(torch.exp(d) - d - 1)
        per_seq_losses.append(losses)
        per_seq_ent.append(ents)
        per_seq_kl.append(kls)
        all_tok += losses
        all_ent += ents
        all_kl += kls

    def agg(per_seq, flat):
        if aggregation == "token_mean":
            return torch.stack(flat).sum() / len(flat)
        if aggregation == "prompt_mean":
            return torch.stack([torch.stack(s).mean() for s in per_seq]).mean()
        return torch.stack([torch.stack(s).sum() / width for s in per_seq]).mean()

    out = {
        "loss_objective": agg(per_seq_losses, all_tok),
        "loss_entropy": -entropy_coeff * agg(per_seq_ent, all_ent),
    }
    if kl_coeff is not None:
        out["loss_kl_to_ref"] = kl_coeff * agg(per_seq_kl, all_kl)
    return out


@pytest.mark.parametrize("pad_output", [False, True])
@pytest.mark.parametrize("aggregation", ["token_mean", "prompt_mean", "constant_mean"])
@pytest.mark.parametrize("kl_coeff", [None, 0.1])
def test_grpo_loss_vs_reference(model, tokenizer, pad_output, aggregation, kl_coeff):
    td = _sampled_batch(model, tokenizer, pad_output)
    ref_rows = None
    if kl_coeff is not None:
        g = torch.Generator().manual_seed(5)
        full = td.get(("log_probs", "full"), as_padded_tensor=True)
        ref = full.detach() + 0.2 * torch.randn(full.shape, generator=g)
        td["next"] = TensorDict(batch_size=(4,))
        if pad_output:
            td["next", "ref_log_probs"] = TensorDict(full=ref, batch_size=(4,))
            mask = td["masks", "all_attention_mask"]
            ref_rows = [r[m] for r, m in zip(ref, mask, strict=True)]
        else:
            lengths = [f.numel() for f in _rows(td, ("tokens", "full"))]
            ref_rows = [ref[i, :n] for i, n in enumerate(lengths)]
            td["next", "ref_log_probs"] = lazy_stack([TensorDict(full=r) for r in ref_rows])
    scorer = TransformersWrapper(model, tokenizer=tokenizer, generate=False, input_mode="tokens")
    loss = GRPOLoss(
        scorer, clip_epsilon=(0.2, 0.28), aggregation=aggregation, kl_to_ref_coeff=kl_coeff
    )
    out = loss(td)
    with torch.no_grad():
        expected = _reference_grpo(model, td, aggregation, 0.2, 0.28, kl_coeff, ref_rows, 0.01)
    torch.testing.assert_close(
        out.loss_objective.detach(), expected["loss_objective"], atol=1e-5, rtol=1e-4
    )
    torch.testing.assert_close(
        out.loss_entropy.detach(), expected["loss_entropy"], atol=1e-6, rtol=1e-4
    )
    if kl_coeff is not None:
        torch.testing.assert_close(
            out.loss_kl_to_ref.detach(), expected["loss_kl_to_ref"], atol=1e-6, rtol=1e-4
        )
    else:
        assert out.loss_kl_to_ref is None
    assert 0 < float(out.clip_fraction) < 1
    model.zero_grad()
    out.total().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    model.zero_grad()


def test_grpo_masking_strategies(model, tokenizer):
    td = _sampled_batch(model, tokenizer, pad_output=False)
    scorer = TransformersWrapper(model, tokenizer=tokenizer, generate=False, input_mode="tokens")
    sft = GRPOLoss(scorer, masking_strategy="sft", entropy_bonus=False, aggregation="none")(td)
    rlhf = GRPOLoss(scorer, masking_strategy="rlhf", entropy_bonus=False, aggregation="none")(td)
    generic = GRPOLoss(scorer, masking_strategy="generic", entropy_bonus=False, aggregation="none")(
        td
    )
    # single-turn generation: the response is what the assistant produced
    torch.testing.assert_close(sft.loss_objective, rlhf.loss_objective)
    assistant = td.get(("masks", "all_assistant_mask"), as_padded_tensor=True)
    assert bool((sft.loss_objective[~assistant] == 0).all())
    # generic also trains on prompt tokens (where old log-probs were 0: ratios far from 1)
    assert bool((generic.loss_objective[~assistant] != 0).any())


def test_grpo_errors(model, tokenizer):
    td = _sampled_batch(model, tokenizer, pad_output=False)
    scorer = TransformersWrapper(model, tokenizer=tokenizer, generate=False, input_mode="tokens")
    with pytest.raises(KeyError, match="MCAdvantage"):
        GRPOLoss(scorer)(td.exclude("advantage"))
    bad = td.exclude("advantage")
    bad["advantage"] = torch.ones(4, 3)
    with pytest.raises(ValueError, match="per sequence"):
        GRPOLoss(scorer)(bad)
    with pytest.raises(ValueError, match="clip_epsilon"):
        GRPOLoss(scorer, clip_epsilon=1.5)
    with pytest.raises(ValueError, match="masking_strategy"):
        GRPOLoss(scorer, masking_strategy="all")
    with pytest.raises(ValueError, match="Unknown keys"):
        GRPOLoss(scorer).set_keys(reward="r")
    with pytest.raises(KeyError, match="ref_log_probs"):
        GRPOLoss(scorer, kl_to_ref_coeff=0.1)(td)


# ---- MCAdvantage --------------------------------------------------------------------------
def _trajectory(query, rewards):
    n = len(rewards)
    done = torch.zeros(n, 1, dtype=torch.bool)
    done[-1] = True
    return TensorDict(
        {
            "query": [query] * n,
            ("next", "reward"): torch.tensor(rewards).reshape(n, 1),
            ("next", "done"): done,
        },
        batch_size=(n,),
    )


def test_mc_advantage_groups_interleaved_prompts():
    mc = MCAdvantage(grpo_size=3, prompt_key="query", trajectory_return="sum")
    assert mc.inv(_trajectory("a", [1.0])) is None  # incomplete groups write nothing
    assert mc.inv(_trajectory("b", [0.0])) is None
    assert mc.inv(_trajectory("a", [0.0, 0.5])) is None  # a two-step trajectory, return 0.5
    out = mc.inv(_trajectory("a", [2.0]))
    assert out.batch_size == (4,)
    m, s = statistics.mean([1.0, 0.5, 2.0]), statistics.stdev([1.0, 0.5, 2.0])
    expected = [(1.0 - m) / s, (0.5 - m) / s, (0.5 - m) / s, (2.0 - m) / s]
    torch.testing.assert_close(
        out["advantage"].flatten(), torch.tensor(expected), rtol=1e-5, atol=1e-5
    )
    assert list(mc.queues) == ["b"]
    assert (mc.completed_groups, mc.written_groups, mc.queued_trajectories) == (1, 1, 1)


def test_mc_advantage_batch_of_trajectories_and_dr_grpo():
    mc = MCAdvantage(grpo_size=2, prompt_key="query", scale=False, trajectory_return="sum")
    batch = torch.cat(
        [
            _trajectory("x", [1.0]),
            _trajectory("y", [3.0]),
            _trajectory("x", [0.0]),
            _trajectory("y", [1.0]),
        ]
    )
    out = mc.inv(batch)
    assert out.batch_size == (4,)
    by_query = {}
    for step in out.unbind(0):
        by_query.setdefault(step["query"], []).append(float(step["advantage"]))
    assert by_query == {"x": [0.5, -0.5], "y": [1.0, -1.0]}
    assert mc(out) is out  # sampling leaves data alone


def test_mc_advantage_errors():
    with pytest.raises(ValueError, match="grpo_size"):
        MCAdvantage(grpo_size=1, trajectory_return="sum")
    mc = MCAdvantage(grpo_size=2)
    unfinished = _trajectory("a", [1.0, 2.0])
    unfinished["next", "done"] = torch.zeros(2, 1, dtype=torch.bool)
    with pytest.raises(ValueError, match="whole trajectories"):
        mc.inv(unfinished)
    with pytest.raises(KeyError, match="reward"):
        mc.inv(_trajectory("a", [1.0]).exclude(("next", "reward")))


# ---- SFTLoss ------------------------------------------------------------------------------
CONVERSATIONS = [
    [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "12+13="},
        {"role": "assistant", "content": "25"},
        {"role": "user", "content": "and 3*3="},
        {"role": "assistant", "content": "9"},
    ],
]


def _reference_sft_terms(model, tokenizer, messages):
    """-log p of each assistant token (content + <|im_end|>), located by rendering text prefixes."""
    text = ""
    targets = []
    for m in messages:
        text += f"<|im_start|>{m['role']}\n"
        if m["role"] == "assistant":
            start = len(tokenizer(text)["input_ids"])
            n = len(tokenizer(m["content"] + "<|im_end|>")["input_ids"])
            targets.extend(range(start, start + n))
        text += f"{m['content']}<|im_end|>\n"
    ids = torch.tensor(tokenizer(text)["input_ids"])
    lp, _ = _reference_log_probs(model, ids)
    return [-lp[t] for t in targets]


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_sft_loss_vs_reference(model, tokenizer, normalize, reduction):
    actor = TransformersWrapper(model, tokenizer=tokenizer, generate=False)
    td = TensorDict(
        history=ChatHistory(full=History.from_chats(CONVERSATIONS), batch_size=(2,)),
        batch_size=(2,),
    )
    out = SFTLoss(actor, reduction=reduction, normalize_by_seq_length=normalize)(td)
    with torch.no_grad():
        per_seq = []
        for chat in CONVERSATIONS:
            terms = _reference_sft_terms(model, tokenizer, chat)
            per_seq.append(sum(terms) / (len(terms) if normalize else 1))
        per_seq = torch.stack(per_seq)
    expected = {"mean": per_seq.mean(), "sum": per_seq.sum(), "none": per_seq}[reduction]
    torch.testing.assert_close(out.loss_sft.detach(), expected, atol=1e-5, rtol=1e-5)
    model.zero_grad()
    out.loss_sft.sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    model.zero_grad()


def test_sft_loss_errors(model, tokenizer):
    actor = TransformersWrapper(model, tokenizer=tokenizer, generate=False)
    no_reply = History.from_chats([[{"role": "user", "content": "1+1="}]])
    td = TensorDict(history=ChatHistory(full=no_reply, batch_size=(1,)), batch_size=(1,))
    with pytest.raises(ValueError, match="no assistant message"):
        SFTLoss(actor)(td)
    with pytest.raises(KeyError, match="History"):
        SFTLoss(actor)(TensorDict(batch_size=(1,)))
    with pytest.raises(ValueError, match="reduction"):
        SFTLoss(actor, reduction="avg")


def test_on_policy_batch_has_unit_ratios_in_train_mode(tokenizer):
    # the tiny model has no dropout, so a model in train mode scores what it sampled
    model = tiny_causal_lm(tokenizer, n_positions=64, seed=3).train()
    torch.manual_seed(0)
    policy = TransformersWrapper(model, tokenizer=tokenizer, generate_kwargs={"max_new_tokens": 6})
    prompt = History.from_chats(PROMPTS)
    td = policy(TensorDict(history=ChatHistory(prompt=prompt, batch_size=(4,)), batch_size=(4,)))
    td["advantage"] = torch.tensor([[1.0], [-1.0], [0.5], [-0.5]])
    scorer = TransformersWrapper(model, tokenizer=tokenizer, generate=False, input_mode="tokens")
    out = GRPOLoss(scorer)(td)
    assert float(out.clip_fraction) == 0.0
    assert float(out.kl_approx) < 1e-10


def test_k3_kl_token_estimate_matches_closed_form_and_checks_shapes():
    student, teacher = torch.tensor([-1.0, -2.0, -0.3]), torch.tensor([-0.5, -2.5, -0.1])
    d = teacher - student
    torch.testing.assert_close(k3_kl_token_estimate(teacher, student), d.expm1() - d)
    torch.testing.assert_close(k3_kl_token_estimate(teacher, student), kl_k3(student, teacher))
    with pytest.raises(ValueError, match="same shape"):
        k3_kl_token_estimate(torch.zeros(3), torch.zeros(4))
