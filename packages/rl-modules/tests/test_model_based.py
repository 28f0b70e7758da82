"""Dreamer's modules against plain-torch recomputations on fixed tensors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_modules.model_based import (
    ContinuationHead,
    ObsDecoder,
    ObsEncoder,
    RSSMPosterior,
    RSSMPosteriorV3,
    RSSMPrior,
    RSSMPriorV3,
    RSSMRollout,
    RSSMRolloutV3,
    SymExpTwoHot,
    WorldModelWrapper,
    default_bins,
    straight_through_categorical,
    symexp,
    symlog,
    two_hot_cross_entropy,
    two_hot_decode,
    two_hot_encode,
    unimix_probs,
)

# ------------------------------------------------------------------ functional


def test_symlog_symexp_closed_form():
    x = torch.tensor([-100.0, -1.5, 0.0, 0.3, 7.0])
    expected = torch.tensor([math.copysign(math.log(1 + abs(v)), v) for v in x.tolist()])
    torch.testing.assert_close(symlog(x), expected)
    torch.testing.assert_close(symexp(symlog(x)), x)
    torch.testing.assert_close(
        symexp(torch.tensor([2.0, -2.0])), torch.tensor([math.e**2 - 1, 1 - math.e**2])
    )


def test_default_bins():
    bins = default_bins()
    assert bins.shape == (255,)
    torch.testing.assert_close(bins, -bins.flip(0))
    assert bins[127] == 0
    torch.testing.assert_close(bins[-1], torch.tensor(math.expm1(20.0)))
    assert bool((bins[1:] > bins[:-1]).all())
    with pytest.raises(ValueError, match="at least 2"):
        default_bins(1)


def _two_hot_reference(x: float, bins: list[float]) -> list[float]:
    code = [0.0] * len(bins)
    if x <= bins[0]:
        code[0] = 1.0
        return code
    if x >= bins[-1]:
        code[-1] = 1.0
        return code
    for i in range(len(bins) - 1):
        if bins[i] <= x < bins[i + 1]:
            w = (x - bins[i]) / (bins[i + 1] - bins[i])
            code[i], code[i + 1] = 1 - w, w
            return code
    raise AssertionError


@pytest.mark.parametrize("x", [-5.0, -1.0, -0.2, 0.0, 0.5, 1.0, 2.9, 10.0])
def test_two_hot_encode_matches_loop(x):
    bins = [-2.0, -1.0, 0.0, 0.5, 3.0]
    got = two_hot_encode(torch.tensor([x]), torch.tensor(bins))[0]
    torch.testing.assert_close(got, torch.tensor(_two_hot_reference(x, bins)))


def test_two_hot_roundtrip_and_cross_entropy():
    bins = default_bins()
    target = torch.tensor([[-321.0, -0.5], [0.0, 42.0]])
    code = two_hot_encode(target, bins)
    torch.testing.assert_close(code.sum(-1), torch.ones(2, 2))
    torch.testing.assert_close((code * bins).sum(-1), target, rtol=1e-4, atol=1e-4)
    logits = torch.randn(2, 2, 255)
    expected_decode = (torch.softmax(logits, -1) * bins).sum(-1)
    torch.testing.assert_close(two_hot_decode(logits, bins), expected_decode)
    expected_ce = -(code * torch.log_softmax(logits, -1)).sum(-1)
    torch.testing.assert_close(two_hot_cross_entropy(logits, target, bins), expected_ce)
    torch.testing.assert_close(
        two_hot_cross_entropy(logits, target.unsqueeze(-1), bins), expected_ce
    )
    with pytest.raises(ValueError, match="target has shape"):
        two_hot_cross_entropy(logits, torch.zeros(3), bins)
    with pytest.raises(ValueError, match="len\\(bins\\)"):
        two_hot_decode(torch.zeros(2, 7), bins)
    head = SymExpTwoHot()
    torch.testing.assert_close(head(logits), expected_decode.unsqueeze(-1))


def test_unimix_and_straight_through():
    logits = torch.tensor([[0.0, 50.0, -50.0]], requires_grad=True)
    probs = unimix_probs(logits, 0.01)
    assert float(probs.detach().min()) >= 0.01 / 3 - 1e-7
    torch.testing.assert_close(probs.sum(-1), torch.ones(1))
    torch.manual_seed(0)
    sample = straight_through_categorical(logits.expand(1000, 3), 0.3)
    assert set(sample.detach().unique().tolist()) <= {0.0, 1.0}
    # forward is a one-hot sample with the mixture's frequencies
    freq = sample.detach().mean(0)
    torch.testing.assert_close(freq, unimix_probs(logits, 0.3).detach()[0], atol=0.05, rtol=0)
    # backward is that of the probabilities
    w = torch.randn(1000, 3)
    (g_st,) = torch.autograd.grad((sample * w).sum(), logits)
    (g_ref,) = torch.autograd.grad((unimix_probs(logits.expand(1000, 3), 0.3) * w).sum(), logits)
    torch.testing.assert_close(g_st, g_ref)
    with pytest.raises(ValueError, match="unimix"):
        unimix_probs(logits, 1.0)


# ------------------------------------------------------------------ RSSM v1


def _gru_ref(cell: torch.nn.GRUCell, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    wr, wz, wn = cell.weight_ih.chunk(3)
    ur, uz, un = cell.weight_hh.chunk(3)
    br, bz, bn = cell.bias_ih.chunk(3)
    cr, cz, cn = cell.bias_hh.chunk(3)
    r = torch.sigmoid(x @ wr.T + br + h @ ur.T + cr)
    z = torch.sigmoid(x @ wz.T + bz + h @ uz.T + cz)
    n = torch.tanh(x @ wn.T + bn + r * (h @ un.T + cn))
    return (1 - z) * n + z * h


def test_rssm_prior_matches_plain_torch():
    torch.manual_seed(0)
    prior = RSSMPrior(None, hidden_dim=8, rnn_hidden_dim=6, state_dim=4, action_dim=2, scale_lb=0.1)
    s, h, a, noise = torch.randn(5, 4), torch.randn(5, 6), torch.randn(5, 2), torch.randn(5, 4)
    mean, std, state, belief = prior(s, h, a, noise=noise)
    lin = prior.action_state_projector[0]
    x = F.elu(torch.cat([s, a], -1) @ lin.weight.T + lin.bias)
    h_ref = _gru_ref(prior.rnn, x, h)
    l1, l2 = prior.rnn_to_prior_projector[0], prior.rnn_to_prior_projector[2]
    out = F.elu(h_ref @ l1.weight.T + l1.bias) @ l2.weight.T + l2.bias
    mean_ref, pre_std = out.chunk(2, -1)
    std_ref = F.softplus(pre_std).clamp_min(0.1)
    torch.testing.assert_close(belief, h_ref)
    torch.testing.assert_close(mean, mean_ref)
    torch.testing.assert_close(std, std_ref)
    torch.testing.assert_close(state, mean_ref + noise * std_ref)


def test_rssm_prior_reads_action_spec_and_batch_dims():
    class Spec:
        shape = torch.Size([3])

    prior = RSSMPrior(Spec(), hidden_dim=8, rnn_hidden_dim=6, state_dim=4)
    _, _, state, belief = prior(torch.zeros(2, 7, 4), torch.zeros(2, 7, 6), torch.zeros(2, 7, 3))
    assert belief.shape == (2, 7, 6) and state.shape == (2, 7, 4)


def test_rssm_posterior_matches_plain_torch():
    torch.manual_seed(1)
    post = RSSMPosterior(hidden_dim=8, state_dim=4, rnn_hidden_dim=6, obs_embed_dim=3)
    h, e, noise = torch.randn(5, 6), torch.randn(5, 3), torch.randn(5, 4)
    mean, std, state = post(h, e, noise=noise)
    l1, l2 = post.obs_rnn_to_post_projector[0], post.obs_rnn_to_post_projector[2]
    out = F.elu(torch.cat([h, e], -1) @ l1.weight.T + l1.bias) @ l2.weight.T + l2.bias
    mean_ref, pre = out.chunk(2, -1)
    torch.testing.assert_close(mean, mean_ref)
    torch.testing.assert_close(std, F.softplus(pre).clamp_min(0.1))
    torch.testing.assert_close(state, mean_ref + noise * std)


def _v1_modules(embed=5):
    prior = TensorDictModule(
        RSSMPrior(None, hidden_dim=8, rnn_hidden_dim=6, state_dim=4, action_dim=2),
        in_keys=["state", "belief", "action"],
        out_keys=[("next", "prior_mean"), ("next", "prior_std"), "_", ("next", "belief")],
    )
    post = TensorDictModule(
        RSSMPosterior(hidden_dim=8, state_dim=4, rnn_hidden_dim=6, obs_embed_dim=embed),
        in_keys=[("next", "belief"), ("next", "encoded_latents")],
        out_keys=[("next", "posterior_mean"), ("next", "posterior_std"), ("next", "state")],
    )
    return prior, post


def test_rssm_rollout_matches_python_loop():
    torch.manual_seed(2)
    prior, post = _v1_modules()
    B, T = 3, 6
    td = TensorDict(
        {
            "state": torch.randn(B, T, 4),
            "belief": torch.randn(B, T, 6),
            "action": torch.randn(B, T, 2),
            ("next", "encoded_latents"): torch.randn(B, T, 5),
        },
        [B, T],
    )
    torch.manual_seed(3)
    out = RSSMRollout(prior, post)(td)
    torch.manual_seed(3)
    s, h = td["state"][:, 0], td["belief"][:, 0]
    states, beliefs, means = [], [], []
    for t in range(T):
        _, _, _, h = prior.module(s, h, td["action"][:, t])
        pm, _, s = post.module(h, td["next", "encoded_latents"][:, t])
        states.append(s)
        beliefs.append(h)
        means.append(pm)
    torch.testing.assert_close(out["next", "state"], torch.stack(states, 1))
    torch.testing.assert_close(out["next", "belief"], torch.stack(beliefs, 1))
    torch.testing.assert_close(out["next", "posterior_mean"], torch.stack(means, 1))
    # the carried root state is the previous posterior sample
    torch.testing.assert_close(out["state"][:, 1:], out["next", "state"][:, :-1])
    torch.testing.assert_close(out["state"][:, 0], td["state"][:, 0])
    assert out.batch_size == (B, T)


def test_rssm_rollout_errors():
    prior, post = _v1_modules()
    roll = RSSMRollout(prior, post)
    with pytest.raises(ValueError, match="time dimension"):
        roll(TensorDict({"state": torch.zeros(4)}, []))
    td = TensorDict(
        {
            "state": torch.zeros(2, 3, 4),
            "belief": torch.zeros(2, 3, 6),
            "action": torch.zeros(2, 3, 2),
        },
        [2, 3],
    )
    with pytest.raises(KeyError, match="encoded_latents"):
        roll(td)


# ------------------------------------------------------------------ RSSM v3


def test_rssm_prior_v3_matches_plain_torch():
    torch.manual_seed(4)
    prior = RSSMPriorV3(
        hidden_dim=8, rnn_hidden_dim=6, num_categoricals=4, num_classes=3, action_dim=2
    )
    s, h, a = torch.randn(5, 12), torch.randn(5, 6), torch.randn(5, 2)
    logits, state, belief = prior(s, h, a)
    lin = prior.action_state_projector[0]
    h_ref = _gru_ref(prior.rnn, F.silu(torch.cat([s, a], -1) @ lin.weight.T + lin.bias), h)
    l1, l2 = prior.rnn_to_prior_projector[0], prior.rnn_to_prior_projector[2]
    logits_ref = (F.silu(h_ref @ l1.weight.T + l1.bias) @ l2.weight.T + l2.bias).reshape(5, 4, 3)
    torch.testing.assert_close(belief, h_ref)
    torch.testing.assert_close(logits, logits_ref)
    one_hot = state.detach().reshape(5, 4, 3)
    torch.testing.assert_close(one_hot.sum(-1), torch.ones(5, 4))
    # straight-through: d state / d logits is that of the softmax
    w = torch.randn(5, 12)
    (g,) = torch.autograd.grad((state * w).sum(), logits)
    probs = torch.softmax(logits.detach().requires_grad_(), -1)
    leaf = probs.grad_fn.next_functions[0][0].variable
    (g_ref,) = torch.autograd.grad((probs.reshape(5, 12) * w).sum(), leaf)
    torch.testing.assert_close(g, g_ref)


def test_rssm_posterior_v3_and_rollout_resets():
    torch.manual_seed(5)
    prior = TensorDictModule(
        RSSMPriorV3(
            hidden_dim=8,
            rnn_hidden_dim=6,
            num_categoricals=2,
            num_classes=3,
            action_dim=2,
            unimix=0.01,
        ),
        in_keys=["state", "belief", "action"],
        out_keys=[("next", "prior_logits"), ("next", "state"), ("next", "belief")],
    )
    post = TensorDictModule(
        RSSMPosteriorV3(
            hidden_dim=8,
            num_categoricals=2,
            num_classes=3,
            rnn_hidden_dim=6,
            obs_embed_dim=5,
            unimix=0.01,
        ),
        in_keys=[("next", "belief"), ("next", "encoded_latents")],
        out_keys=[("next", "posterior_logits"), ("next", "state")],
    )
    B, T = 2, 5
    is_init = torch.zeros(B, T, 1, dtype=torch.bool)
    is_init[:, 0] = True
    is_init[1, 3] = True
    td = TensorDict(
        {
            "state": torch.randn(B, T, 6),
            "belief": torch.randn(B, T, 6),
            "action": torch.randn(B, T, 2),
            "is_init": is_init,
            ("next", "encoded_latents"): torch.randn(B, T, 5),
        },
        [B, T],
    )
    torch.manual_seed(6)
    out = RSSMRolloutV3(prior, post)(td)
    torch.manual_seed(6)
    s, h = td["state"][:, 0], td["belief"][:, 0]
    beliefs = []
    for t in range(T):
        m = td["is_init"][:, t]
        s, h = torch.where(m, 0.0, s), torch.where(m, 0.0, h)
        a = torch.where(m, 0.0, td["action"][:, t])
        _, _, h = prior.module(s, h, a)
        _, s = post.module(h, td["next", "encoded_latents"][:, t])
        beliefs.append(h)
    torch.testing.assert_close(out["next", "belief"], torch.stack(beliefs, 1))
    assert out["belief"][1, 3].abs().sum() == 0 and out["belief"][0, 3].abs().sum() > 0
    assert out["next", "posterior_logits"].shape == (B, T, 2, 3)


# ------------------------------------------------------------------ pixels and wrapper


@pytest.mark.parametrize("num_layers", [4, 2])
def test_obs_decoder_matches_plain_transposed_convolutions(num_layers):
    torch.manual_seed(0)
    dec = ObsDecoder(channels=4, num_layers=num_layers, latent_dim=10)
    state, belief = torch.randn(2, 3, 4, requires_grad=True), torch.randn(2, 3, 6)
    out = dec(state, belief)
    lin = dec.state_to_latent[0]
    h = F.relu(F.linear(torch.cat([state, belief], -1), lin.weight, lin.bias))
    h = h.reshape(6, -1, 1, 1)
    convs = [m for m in dec.decoder if isinstance(m, torch.nn.ConvTranspose2d)]
    for i, conv in enumerate(convs):
        h = F.conv_transpose2d(h, conv.weight, conv.bias, stride=2)
        h = F.relu(h) if i < len(convs) - 1 else h
    ref = h.reshape(2, 3, *h.shape[1:])
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    g = torch.randn_like(out)
    grads = torch.autograd.grad((out * g).sum(), [state, convs[0].weight, convs[0].bias])
    refs = torch.autograd.grad((ref * g).sum(), [state, convs[0].weight, convs[0].bias])
    for a, b in zip(grads, refs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_obs_encoder_decoder_shapes_and_errors():
    enc = ObsEncoder(channels=4, in_channels=3)
    emb = enc(torch.rand(2, 3, 3, 64, 64))
    assert emb.shape == (2, 3, 4 * 8 * 2 * 2)
    dec = ObsDecoder(channels=4, latent_dim=10)
    assert dec(torch.zeros(2, 3, 4), torch.zeros(2, 3, 6)).shape == (2, 3, 3, 64, 64)
    with pytest.raises(ValueError, match=r"\[\*B, 3, H, W\]"):
        enc(torch.rand(2, 64, 64, 3))
    with pytest.raises(TypeError, match="float pixels"):
        enc(torch.zeros(2, 3, 64, 64, dtype=torch.uint8))
    assert (
        ObsDecoder(channels=4, num_layers=3, latent_dim=5)(
            torch.zeros(1, 2), torch.zeros(1, 3)
        ).ndim
        == 4
    )


def test_world_model_wrapper_unknown_observation_key():
    enc = TensorDictModule(
        ObsEncoder(channels=4, in_channels=3),
        in_keys=[("next", "pixels")],
        out_keys=[("next", "encoded_latents")],
    )
    reward = TensorDictModule(
        torch.nn.Linear(128, 1),
        in_keys=[("next", "encoded_latents")],
        out_keys=[("next", "reward")],
    )
    wm = WorldModelWrapper(enc, reward)
    assert wm.get_transition_model_operator() is enc and wm.get_reward_operator() is reward
    td = TensorDict({("next", "observation"): torch.zeros(2, 3)}, [2])
    with pytest.raises(KeyError, match=r"\('next', 'pixels'\).*Present entries.*observation"):
        wm(td)
    good = TensorDict({("next", "pixels"): torch.rand(2, 3, 64, 64)}, [2])
    assert wm(good)["next", "reward"].shape == (2, 1)


def test_rssm_rollout_generic_path_equals_plain_path():
    from tensordict.nn import TensorDictSequential

    torch.manual_seed(7)
    prior, post = _v1_modules()
    td = TensorDict(
        {
            "state": torch.zeros(2, 5, 4),
            "belief": torch.zeros(2, 5, 6),
            "action": torch.randn(2, 5, 2),
            ("next", "encoded_latents"): torch.randn(2, 5, 5),
        },
        [2, 5],
    )
    torch.manual_seed(8)
    plain = RSSMRollout(prior, post)(td)
    torch.manual_seed(8)
    generic = RSSMRollout(TensorDictSequential(prior), post)(td)
    for key in [("next", "state"), ("next", "belief"), ("next", "prior_mean"), "state", "belief"]:
        torch.testing.assert_close(plain[key], generic[key])


def test_continuation_head_matches_plain_torch():
    torch.manual_seed(0)
    head = ContinuationHead(7, depth=1, num_cells=5)
    state, belief = torch.randn(4, 3, 4), torch.randn(4, 3, 3)
    logit, prob = head(state, belief)
    first, last = head.net[0], head.net[2]
    x = torch.cat([state, belief], -1)
    ref = F.elu(x @ first.weight.T + first.bias) @ last.weight.T + last.bias
    torch.testing.assert_close(logit, ref)
    torch.testing.assert_close(prob, 1 / (1 + torch.exp(-ref)))
    # trained with BCE against 1 - terminated, it learns the terminal step
    target = torch.ones(4, 3, 1)
    target[:, -1] = 0.0
    optim = torch.optim.Adam(head.parameters(), lr=0.05)
    for _ in range(100):
        optim.zero_grad()
        logit, _ = head(state, belief)
        F.binary_cross_entropy_with_logits(logit, target).backward()
        optim.step()
    _, prob = head(state, belief)
    assert bool((prob[:, :-1] > 0.9).all()) and bool((prob[:, -1] < 0.1).all())
