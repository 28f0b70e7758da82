"""rl_objectives.functional: each pure function against a plain formula or loop, and its examples."""

from __future__ import annotations

import doctest

import pytest
import torch

import rl_objectives.functional as RF
from rl_objectives.utils import distance_loss


def _g(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_docstring_examples_run():
    result = doctest.testmod(RF, extraglobs={"torch": torch}, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= len(RF.__all__) - 1  # every function has an example
    assert result.failed == 0


def test_every_public_function_is_exported_and_documented():
    for name in RF.__all__:
        obj = getattr(RF, name)
        assert obj.__doc__, name
    assert RF.distance_loss is distance_loss  # one definition, re-exported by utils


@pytest.mark.parametrize("epsilon", [0.2, (0.1, 0.3)])
def test_clipped_surrogate_against_ratio_formula(epsilon):
    g = _g()
    log_ratio = torch.randn(64, generator=g) * 0.5
    adv = torch.randn(64, generator=g)
    low, high = epsilon if isinstance(epsilon, tuple) else (epsilon, epsilon)
    r = log_ratio.exp()
    expected = -torch.minimum(r * adv, r.clamp(1 - low, 1 + high) * adv)
    out = RF.clipped_surrogate_loss(log_ratio, adv, epsilon)
    torch.testing.assert_close(out.loss, expected)
    frac = ((r < 1 - low) | (r > 1 + high)).float().mean()
    torch.testing.assert_close(out.clip_fraction, frac)
    assert not out.clip_fraction.requires_grad


def test_clipped_surrogate_gradient_is_zero_where_clipped():
    log_ratio = torch.log(torch.tensor([0.5, 1.0, 2.0])).requires_grad_()
    RF.clipped_surrogate_loss(log_ratio, torch.ones(3), 0.2).loss.sum().backward()
    # r = 0.5 with A > 0: min picks the unclipped term, which has a gradient; r = 2: clipped
    assert log_ratio.grad[2] == 0
    assert log_ratio.grad[0] != 0 and log_ratio.grad[1] != 0


def test_surrogate_kl_and_entropy_terms():
    g = _g(1)
    lr, adv, kl = torch.randn(8, generator=g), torch.randn(8, generator=g), torch.rand(8)
    torch.testing.assert_close(RF.surrogate_loss(lr, adv), -(lr.exp() * adv))
    torch.testing.assert_close(RF.kl_penalty_loss(lr, adv, kl, 0.3), -(lr.exp() * adv) + 0.3 * kl)
    torch.testing.assert_close(RF.policy_gradient_loss(lr, adv), -(lr * adv))
    torch.testing.assert_close(RF.entropy_loss(kl, 0.01), -0.01 * kl)


@pytest.mark.parametrize(("kl", "factor"), [(0.1, 2.0), (0.001, 0.5), (0.01, 1.0)])
def test_adaptive_kl_factor(kl, factor):
    assert float(RF.adaptive_kl_factor(torch.tensor(kl), 0.01, 2.0, 0.5)) == factor


def test_clipped_value_loss_against_elementwise_max():
    g = _g(2)
    target, value, old = (torch.randn(16, generator=g) for _ in range(3))
    loss, frac = RF.clipped_value_loss(target, value, "l2", 0.1, old)
    clipped = old + (value - old).clamp(-0.1, 0.1)
    expected = torch.maximum((target - value) ** 2, (target - clipped) ** 2)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(frac, ((value - old).abs() > 0.1).float().mean())
    plain, none = RF.clipped_value_loss(target, value, "l1")
    torch.testing.assert_close(plain, (target - value).abs())
    assert none is None
    with pytest.raises(ValueError, match="old_value"):
        RF.clipped_value_loss(target, value, "l2", 0.1)


def test_distances_and_huber():
    x = torch.linspace(-3, 3, 13)
    zero = torch.zeros_like(x)
    huber = torch.where(x.abs() <= 2.0, 0.5 * x**2, 2.0 * (x.abs() - 1.0))
    torch.testing.assert_close(RF.huber_loss(x, zero, delta=2.0), huber)
    torch.testing.assert_close(RF.huber_loss(x, zero), RF.distance_loss(x, zero, "smooth_l1"))
    with pytest.raises(ValueError, match="must match"):
        RF.huber_loss(x, zero[:3])
    with pytest.raises(ValueError, match="loss_function"):
        RF.distance_loss(x, zero, "l3")


def test_td_and_n_step_targets_against_a_loop():
    g = _g(3)
    r = torch.randn(5, 4, generator=g)
    terminated = torch.rand(5, 4, generator=g) < 0.3
    disc = 0.9 * (~terminated).float()
    v = torch.randn(5, generator=g)
    expected = torch.empty(5)
    for b in range(5):
        ret, scale = 0.0, 1.0
        for k in range(4):
            ret += scale * float(r[b, k])
            scale *= float(disc[b, k])
        expected[b] = ret + scale * float(v[b])
    torch.testing.assert_close(RF.n_step_target(r, disc, v), expected)
    torch.testing.assert_close(
        RF.n_step_target(r[:, :1], disc[:, :1], v), RF.td_target(r[:, 0], disc[:, 0], v)
    )
    with pytest.raises(ValueError, match="v_tpn"):
        RF.n_step_target(r, disc, v[:2])


def test_q_learning_bootstraps():
    q_target = torch.tensor([[1.0, 5.0, 2.0], [4.0, 0.0, 3.0]])
    q_online = torch.tensor([[0.0, 0.0, 9.0], [9.0, 0.0, 0.0]])
    torch.testing.assert_close(RF.greedy_q_value(q_target), torch.tensor([[5.0], [4.0]]))
    torch.testing.assert_close(RF.double_q_value(q_target, q_online), torch.tensor([[2.0], [4.0]]))
    ens = torch.tensor([[1.0, 7.0], [3.0, 2.0]], requires_grad=True)
    m = RF.clipped_double_q(ens)
    torch.testing.assert_close(m, torch.tensor([1.0, 2.0]))
    m.sum().backward()
    torch.testing.assert_close(ens.grad, torch.tensor([[1.0, 0.0], [0.0, 1.0]]))


def test_smoothed_target_action():
    a = torch.tensor([0.0, 0.9, -0.9])
    noise = torch.tensor([0.7, 0.3, -0.2])
    out = RF.smoothed_target_action(a, noise, 0.5, -1.0, 1.0)
    torch.testing.assert_close(out, torch.tensor([0.5, 1.0, -1.0]))


def test_soft_terms_against_formulas():
    g = _g(4)
    q, lp = torch.randn(6, generator=g), -torch.rand(6, generator=g)
    torch.testing.assert_close(RF.soft_state_value(q, lp, 0.2), q - 0.2 * lp)
    torch.testing.assert_close(RF.soft_policy_loss(lp, q, 0.2), 0.2 * lp - q)
    logits = torch.randn(6, 3, generator=g)
    probs, logp, qa = logits.softmax(-1), logits.log_softmax(-1), torch.randn(6, 3, generator=g)
    expected_v = torch.stack([sum(probs[i, a] * (qa[i, a] - 0.2 * logp[i, a]) for a in range(3))
                              for i in range(6)]).unsqueeze(-1)  # fmt: skip
    torch.testing.assert_close(RF.expected_soft_value(probs, qa, logp, 0.2), expected_v)
    torch.testing.assert_close(
        RF.discrete_soft_policy_loss(probs, logp, qa, 0.2),
        -RF.expected_soft_value(probs, qa, logp, 0.2).squeeze(-1),
    )
    log_alpha = torch.tensor(0.3, requires_grad=True)
    lp_grad = lp.clone().requires_grad_()
    RF.temperature_loss(log_alpha, lp_grad, -1.0).sum().backward()
    torch.testing.assert_close(log_alpha.grad, -(lp - 1.0).sum())
    assert lp_grad.grad is None  # log-probs are detached: only alpha moves


def test_categorical_projection_keeps_mass_and_mean():
    g = _g(5)
    support = torch.linspace(-2, 2, 9)
    probs = torch.rand(4, 9, generator=g).softmax(-1)
    reward = torch.tensor([[0.1], [0.0], [-0.3], [5.0]])
    discount = torch.tensor([[0.9], [0.0], [0.5], [0.9]])
    out = RF.categorical_projection(probs, reward, discount, support)
    torch.testing.assert_close(out.sum(-1), torch.ones(4))
    # rows whose shifted atoms stay inside the support keep their mean exactly
    shifted_mean = reward + discount * (probs * support).sum(-1, keepdim=True)
    torch.testing.assert_close((out * support).sum(-1)[:3], shifted_mean.squeeze(-1)[:3])
    # a clamped row puts all the mass on the top atom
    torch.testing.assert_close(out[3], torch.eye(9)[-1])


def test_effective_sample_size_and_explained_variance():
    lw = torch.log(torch.tensor([1.0, 1.0, 2.0]))
    w = lw.exp()
    torch.testing.assert_close(RF.effective_sample_size(lw), w.sum() ** 2 / (3 * (w**2).sum()))
    t, v = torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1.5, 2.0, 3.0])
    ev = 1 - ((t - v).var(unbiased=False)) / (t.var(unbiased=False) + 1e-8)
    torch.testing.assert_close(RF.explained_variance(t, v), ev)
    x = torch.randn(10, 3, generator=_g(6))
    s = RF.standardize(x, exclude_dims=(-1,))
    torch.testing.assert_close(s.mean(0), torch.zeros(3), atol=1e-6, rtol=0)
    torch.testing.assert_close(s.std(0), torch.ones(3))
