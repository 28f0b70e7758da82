"""sample_and_log_prob / rsample_and_log_prob / composite_entropy, one-hot gradient strategies
and the TORCH_VERSION_PRE_2_6 flag, against torch.distributions references."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import CompositeDistribution, set_composite_lp_aggregate
from torch import distributions as D
from torch.nn import functional as F
from torch.torch_version import TorchVersion

from rl_modules import (
    MaskedOneHotCategorical,
    OneHotCategorical,
    ReparamGradientStrategy,
    TanhNormal,
)
from rl_modules.distributions import (
    TORCH_VERSION_PRE_2_6,
    composite_entropy,
    rsample_and_log_prob,
    sample_and_log_prob,
)


def tanh_normal_reference(pre_tanh, loc, scale, low, high):
    """log N(x) - log|d tanh/dx| - log((high - low) / 2), summed over the last dim."""
    log_det = torch.log1p(-(torch.tanh(pre_tanh.double()) ** 2)) + math.log((high - low) / 2)
    normal = D.Normal(loc.double(), scale.double()).log_prob(pre_tanh.double())
    return (normal - log_det).sum(-1)


@pytest.mark.parametrize("reparameterize", [False, True])
def test_tanh_normal_draw_is_scored_at_its_latent(reparameterize):
    loc = torch.tensor([[3.0, -3.0], [0.5, 0.0]], requires_grad=True)
    scale = torch.full((2, 2), 0.3)
    dist = TanhNormal(loc, scale, low=-2.0, high=2.0, event_dims=1)
    torch.manual_seed(0)
    pre_tanh = loc.detach() + scale * torch.randn(3, 2, 2)
    torch.manual_seed(0)
    helper = rsample_and_log_prob if reparameterize else sample_and_log_prob
    sample, log_prob = helper(dist, (3,))
    torch.testing.assert_close(sample, 2.0 * torch.tanh(pre_tanh))
    assert sample.requires_grad is reparameterize
    ref = tanh_normal_reference(pre_tanh, loc.detach(), scale, -2.0, 2.0)
    torch.testing.assert_close(log_prob.double(), ref, rtol=1e-5, atol=1e-5)


def test_fallback_samples_then_scores():
    dist = D.Normal(torch.zeros(4), torch.ones(4))
    torch.manual_seed(1)
    sample, log_prob = sample_and_log_prob(dist, (2,))
    torch.manual_seed(1)
    expected = torch.randn(2, 4)
    torch.testing.assert_close(sample, expected)
    torch.testing.assert_close(log_prob, -0.5 * expected**2 - 0.5 * math.log(2 * math.pi))


def composite():
    params = TensorDict(
        squashed=TensorDict(loc=torch.full((2, 1), 20.0), scale=torch.full((2, 1), 0.1)),
        normal=TensorDict(loc=torch.zeros(2, 1), scale=torch.full((2, 1), 2.0)),
        batch_size=[2],
    )
    return CompositeDistribution(
        params,
        distribution_map={"squashed": TanhNormal, "normal": D.Normal},
        name_map={"squashed": ("agent", "action"), "normal": ("agent", "aux")},
        extra_kwargs={"squashed": {"event_dims": 1}},
    )


def test_composite_components_and_aggregate(monkeypatch):
    dist = composite()
    monkeypatch.setattr(TanhNormal, "log_prob", lambda *a, **k: pytest.fail("inverse-scored"))
    torch.manual_seed(0)
    with set_composite_lp_aggregate(False):
        sample, parts = sample_and_log_prob(dist, (3,))
    torch.manual_seed(0)
    with set_composite_lp_aggregate(True):
        same, total = rsample_and_log_prob(dist, (3,))
    assert sample.batch_size == torch.Size([3, 2])
    assert set(parts.keys(True, True)) == {("agent", "action_log_prob"), ("agent", "aux_log_prob")}
    torch.testing.assert_close(sample, same.detach())
    aux = sample["agent", "aux"]
    torch.testing.assert_close(parts["agent", "aux_log_prob"], D.Normal(0.0, 2.0).log_prob(aux))
    expected = parts["agent", "action_log_prob"] + parts["agent", "aux_log_prob"].sum(-1)
    torch.testing.assert_close(total, expected)


def test_composite_entropy_analytic_and_monte_carlo():
    dist = composite()
    with set_composite_lp_aggregate(False):
        parts = composite_entropy(dist, samples_mc=4)
    normal_entropy = 0.5 * math.log(2 * math.pi * math.e * 4.0)
    torch.testing.assert_close(parts["agent", "aux_entropy"], torch.full((2, 1), normal_entropy))
    assert parts["agent", "action_entropy"].shape == torch.Size([2])
    assert parts["agent", "action_entropy"].isfinite().all()
    with set_composite_lp_aggregate(True):
        torch.manual_seed(0)
        total = composite_entropy(dist, samples_mc=4)
    torch.manual_seed(0)
    with set_composite_lp_aggregate(False):
        again = composite_entropy(dist, samples_mc=4)
    torch.testing.assert_close(
        total, again["agent", "action_entropy"] + again["agent", "aux_entropy"].sum(-1)
    )


def test_relaxed_one_hot_gradient_is_the_gumbel_softmax_one():
    logits = torch.randn(5, 6, requires_grad=True)
    weights = torch.randn(6)
    torch.manual_seed(0)
    d = OneHotCategorical(logits=logits, grad_method=ReparamGradientStrategy.RelaxedOneHot)
    sample = d.rsample((2,))
    (sample * weights).sum().backward()
    grad = logits.grad.clone()
    logits.grad = None
    torch.manual_seed(0)
    relaxed = D.RelaxedOneHotCategorical(torch.tensor(1.0), logits=logits).rsample((2,))
    torch.testing.assert_close(sample.detach(), F.one_hot(relaxed.argmax(-1), 6).float())
    (relaxed * weights).sum().backward()
    torch.testing.assert_close(grad, logits.grad)


@pytest.mark.parametrize("method", list(ReparamGradientStrategy))
def test_masked_one_hot_rsample_respects_mask(method):
    logits = torch.randn(50, 5, requires_grad=True)
    mask = torch.tensor([True, False, True, False, True])
    d = MaskedOneHotCategorical(logits=logits, mask=mask, grad_method=method)
    sample = d.rsample()
    assert sample.detach().sum(-1).eq(1).all()
    assert sample.detach()[:, ~mask].eq(0).all()
    (sample * torch.arange(5.0)).sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0


def test_grad_method_must_be_a_strategy():
    with pytest.raises(TypeError, match="ReparamGradientStrategy"):
        OneHotCategorical(logits=torch.zeros(3), grad_method="relaxed")


def test_torch_version_flag():
    assert TORCH_VERSION_PRE_2_6 is (TorchVersion(torch.__version__) < "2.6.0")
