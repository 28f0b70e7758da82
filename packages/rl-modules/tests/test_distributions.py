"""Distributions against closed forms and torch.distributions references."""

from __future__ import annotations

import math

import pytest
import torch
from torch import distributions as D

from rl_modules import (
    Delta,
    IndependentNormal,
    MaskedCategorical,
    MaskedOneHotCategorical,
    OneHotCategorical,
    SafeTanhTransform,
    TanhDelta,
    TanhNormal,
    TruncatedNormal,
)


def change_of_variables_log_prob(y, loc, scale, low, high):
    """log p(y) = log N(atanh(u)) - log |dy/dx| with u = (y - mid) / half, in float64."""
    y, loc, scale = y.double(), loc.double(), scale.double()
    half, mid = (high - low) / 2, (high + low) / 2
    u = (y - mid) / half
    x = torch.atanh(u)
    log_det = torch.log(half * (1 - u**2))
    return (D.Normal(loc, scale).log_prob(x) - log_det).sum(-1)


@pytest.mark.parametrize(("low", "high"), [(-1.0, 1.0), (-3.0, 0.5), (0.0, 10.0)])
def test_tanh_normal_log_prob_matches_change_of_variables(low, high):
    torch.manual_seed(0)
    loc, scale = torch.randn(64, 3), torch.rand(64, 3) + 0.2
    d = TanhNormal(loc, scale, low=low, high=high)
    y = d.sample()
    ref = change_of_variables_log_prob(y, loc, scale, low, high)
    # Fresh tensor: no cached pre-tanh value, the inverse is used.
    torch.testing.assert_close(d.log_prob(y.clone()).double(), ref, rtol=1e-4, atol=1e-3)
    # Own sample: the cached pre-tanh value is used.
    torch.testing.assert_close(d.log_prob(y).double(), ref, rtol=1e-4, atol=1e-3)


def test_tanh_normal_log_prob_finite_and_stable_near_bounds():
    loc, scale = torch.zeros(2, 1), torch.ones(2, 1)
    d = TanhNormal(loc, scale, low=-2.0, high=2.0)
    at_bounds = torch.tensor([[2.0], [-2.0]])
    lp = d.log_prob(at_bounds)
    assert torch.isfinite(lp).all()
    # A sample deep in the tail: the cached pre-tanh value gives the exact density.
    d = TanhNormal(torch.full((1, 1), 12.0), torch.full((1, 1), 0.1), safe_tanh=False)
    y = d.rsample()
    assert float(y) == 1.0  # tanh saturates in float32
    x = d._cache[1].double()
    exact = D.Normal(12.0, 0.1).log_prob(x) - torch.log(1 - torch.tanh(x) ** 2)
    torch.testing.assert_close(d.log_prob(y).double(), exact.sum(-1), rtol=1e-4, atol=1e-3)


def test_tanh_normal_rsample_gradients_and_modes():
    loc = torch.zeros(5, 2, requires_grad=True)
    d = TanhNormal(
        loc, torch.ones(5, 2), low=torch.tensor([0.0, -1.0]), high=torch.tensor([4.0, 1.0])
    )
    y = d.rsample()
    y.sum().backward()
    assert loc.grad is not None and (loc.grad != 0).all()
    torch.testing.assert_close(d.mode, torch.tensor([[2.0, 0.0]]).expand(5, 2))
    # mean of tanh(N(0,1)) is 0 by symmetry; shifted loc checked against Monte Carlo.
    d = TanhNormal(torch.tensor([1.0]), torch.tensor([0.7]))
    mc = torch.tanh(
        1.0 + 0.7 * torch.randn(400_000, generator=torch.Generator().manual_seed(0))
    ).mean()
    torch.testing.assert_close(d.mean, mc.reshape(1), atol=5e-3, rtol=0)


def test_tanh_normal_rejects_bad_bounds():
    with pytest.raises(ValueError, match="high must exceed low"):
        TanhNormal(torch.zeros(1), torch.ones(1), low=1.0, high=1.0)


def test_tanh_normal_tensor_bounds_rechecked_after_in_place_change():
    """The check of tensor bounds is remembered per pair of tensors (a policy reuses
    its spec's bounds every step); an in-place change must be seen."""
    low, high = -torch.ones(2), torch.ones(2)
    loc, scale = torch.full((2,), 3.0), torch.full((2,), 1e-3)
    assert torch.allclose(TanhNormal(loc, scale, low=low, high=high).mode, torch.tanh(loc))
    high.mul_(4.0)  # [-1, 4]: no longer the unit box, the affine map must come back
    mode = TanhNormal(loc, scale, low=low, high=high).mode
    torch.testing.assert_close(mode, -1.0 + 2.5 * (torch.tanh(loc) + 1))
    high.fill_(-2.0)
    with pytest.raises(ValueError, match="high must exceed low"):
        TanhNormal(loc, scale, low=low, high=high)
    with pytest.raises(ValueError, match="high must exceed low"):  # twice: nothing kept
        TanhNormal(loc, scale, low=low, high=high)


def test_truncated_normal_against_closed_form():
    torch.manual_seed(0)
    loc, scale, low, high = torch.tensor([0.3, -1.0]), torch.tensor([0.5, 2.0]), -0.5, 1.0
    d = TruncatedNormal(loc, scale, low=low, high=high)
    s = d.sample((200_000,))
    assert float(s.min()) >= low and float(s.max()) <= high
    torch.testing.assert_close(s.mean(0), d.mean, atol=5e-3, rtol=0)
    n = D.Normal(loc.double(), scale.double())
    z = n.cdf(torch.tensor(high).double()) - n.cdf(torch.tensor(low).double())
    v = torch.tensor([0.2, 0.9])
    ref = (n.log_prob(v.double()) - z.log()).sum()
    torch.testing.assert_close(d.log_prob(v).double(), ref, rtol=1e-5, atol=1e-5)
    assert d.log_prob(torch.tensor([2.0, 0.0])) == -math.inf
    torch.testing.assert_close(d.mode, torch.tensor([0.3, -0.5]))
    # entropy = -E[log p], by Monte Carlo
    torch.testing.assert_close(d.entropy(), -d.log_prob(s).mean(), atol=1e-2, rtol=0)


def test_independent_normal_sums_last_dim():
    loc, scale = torch.randn(4, 3), torch.rand(4, 3) + 0.1
    d = IndependentNormal(loc, scale)
    v = torch.randn(4, 3)
    torch.testing.assert_close(d.log_prob(v), D.Normal(loc, scale).log_prob(v).sum(-1))
    torch.testing.assert_close(d.deterministic_sample, loc)


def test_delta_and_tanh_delta():
    p = torch.tensor([[0.5, -1.0]], requires_grad=True)
    d = Delta(p)
    assert d.log_prob(torch.tensor([[0.5, -1.0]])).item() == math.inf  # a Dirac density
    assert d.log_prob(torch.tensor([[0.5, -0.9]])).item() == -math.inf
    d.rsample().sum().backward()
    assert p.grad is not None
    td = TanhDelta(torch.tensor([0.0, 100.0]), low=-2.0, high=6.0)
    torch.testing.assert_close(td.mode, torch.tensor([2.0, 6.0]))
    assert td.sample((3,)).shape == torch.Size([3, 2])


def test_one_hot_categorical_straight_through():
    logits = torch.tensor([[0.0, 2.0, -1.0]], requires_grad=True)
    d = OneHotCategorical(logits=logits)
    torch.testing.assert_close(d.mode, torch.tensor([[0.0, 1.0, 0.0]]))
    s = d.rsample()
    assert s.sum().item() == pytest.approx(1.0)
    (s * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert logits.grad.abs().sum() > 0


@pytest.mark.parametrize("one_hot", [False, True])
def test_masked_categoricals_never_pick_masked_actions(one_hot):
    torch.manual_seed(0)
    logits = torch.tensor([[5.0, 0.0, 1.0, 2.0]]).expand(1000, 4)
    mask = torch.tensor([[False, True, True, False]]).expand(1000, 4)
    cls = MaskedOneHotCategorical if one_hot else MaskedCategorical
    d = cls(logits=logits, mask=mask)
    s = d.sample()
    idx = s.argmax(-1) if one_hot else s
    assert set(idx.unique().tolist()) <= {1, 2}
    mode = d.mode.argmax(-1) if one_hot else d.mode
    assert (mode == 2).all()
    # log-probs: softmax over the allowed actions only; -inf for masked ones.
    ref = torch.log_softmax(torch.tensor([0.0, 1.0]), -1)
    allowed = torch.tensor([1, 2])
    values = torch.nn.functional.one_hot(allowed, 4).float() if one_hot else allowed
    torch.testing.assert_close(cls(logits=logits[:2], mask=mask[:2]).log_prob(values), ref)
    masked = (
        torch.nn.functional.one_hot(torch.tensor([0]), 4).float() if one_hot else torch.tensor([0])
    )
    assert cls(logits=logits[:1], mask=mask[:1]).log_prob(masked).item() == -math.inf


def test_masked_categorical_errors():
    with pytest.raises(ValueError, match="at least one action"):
        MaskedCategorical(
            logits=torch.zeros(2, 3), mask=torch.tensor([[True, False, False], [False] * 3])
        )
    with pytest.raises(TypeError, match="bool"):
        MaskedCategorical(logits=torch.zeros(3), mask=torch.ones(3))


def test_truncated_normal_positional_order_and_device():
    # TorchRL's order: loc, scale, upscale, low, high, tanh_loc.
    d = TruncatedNormal(torch.zeros(2), torch.ones(2), 3.0, -0.5, 0.25)
    assert float(d.low) == -0.5 and float(d.high) == 0.25
    assert d.device == torch.device("cpu")


@pytest.mark.parametrize("low, high", [(-0.1, 1.0), (-1.0, 0.1), (-6.0, 1.5)])
def test_tanh_normal_samples_never_round_past_the_bounds(low, high):
    torch.manual_seed(0)
    loc = torch.tensor([0.1, 10.0, -10.0])
    d = TanhNormal(loc, torch.tensor([0.1, 10.0, 5.0]), low=low, high=high)
    a = d.rsample((2000,))
    assert (a >= low).all() and (a <= high).all()
    assert torch.isfinite(d.log_prob(a)).all()
    assert torch.isfinite(d.log_prob(a.clone())).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tanh_normal_rsample_and_log_prob_scores_the_exact_draw(dtype):
    loc = torch.tensor([[20.0, -20.0], [-20.0, 20.0]], dtype=dtype, requires_grad=True)
    scale = torch.full_like(loc, 0.1, requires_grad=True)
    low, high = -2.0, 3.0
    d = TanhNormal(loc, scale, low=low, high=high)
    torch.manual_seed(0)
    y, lp = d.rsample_and_log_prob()
    torch.manual_seed(0)
    x = loc + scale * torch.randn(loc.shape, dtype=dtype)
    # log|dy/dx| = log((high - low) / 2) + log(1 - tanh(x)^2), written with log cosh.
    log_det = math.log((high - low) / 2) - 2 * (x.abs() + torch.log1p(torch.exp(-2 * x.abs())))
    log_det = log_det + 2 * math.log(2.0)
    ref = (D.Normal(loc, scale).log_prob(x) - log_det).sum(-1)
    torch.testing.assert_close(lp, ref)
    assert (y > low).all() and (y < high).all()
    g = torch.autograd.grad(lp.sum(), (loc, scale))
    g_ref = torch.autograd.grad(ref.sum(), (loc, scale))
    for a, b in zip(g, g_ref, strict=True):
        torch.testing.assert_close(a, b)
    y2, lp2 = d.sample_and_log_prob((3,))
    assert not y2.requires_grad and lp2.requires_grad and lp2.shape == (3, 2)


def test_tanh_normal_scale_types_update_and_default_event_dims():
    loc = torch.randn(3, 4)
    for scale in (0.5, torch.full((3, 4), 0.5), lambda t: torch.full_like(t, 0.5)):
        d = TanhNormal(loc, scale)
        torch.testing.assert_close(d.scale, torch.full((3, 4), 0.5))
        assert d.log_prob(d.sample()).shape == (3,)
    d.update(torch.zeros(2, 5), torch.ones_like)
    torch.testing.assert_close(d.scale, torch.ones(2, 5))
    assert d.sample().shape == (2, 5)
    # a 0-d loc has no event dim to sum over
    assert TanhNormal(torch.tensor(0.3), 1.0).log_prob(torch.tensor(0.2)).shape == ()
    n = IndependentNormal(loc, torch.ones_like)
    torch.testing.assert_close(n.base_dist.scale, torch.ones(3, 4))
    n.update(torch.zeros(2, 5), 2.0)
    torch.testing.assert_close(n.base_dist.scale, torch.full((2, 5), 2.0))


@pytest.mark.parametrize("scale", [0.3, 0.9, 2.0])
def test_tanh_normal_get_mode_maximises_the_density(scale):
    loc = torch.tensor([-1.5, 0.0, 0.4, 2.0], dtype=torch.float64)
    d = TanhNormal(loc, scale, low=-1.0, high=3.0, event_dims=0)
    mode = d.get_mode()
    # brute force on a fine grid of the action space, with the float64 change of variables
    ys = torch.linspace(-1.0, 3.0, 8001, dtype=torch.float64)[1:-1, None]
    lp = torch.stack(
        [
            change_of_variables_log_prob(ys, loc[i].expand(1), torch.full((1,), scale), -1.0, 3.0)
            for i in range(4)
        ],
        -1,
    )
    torch.testing.assert_close(mode, ys[lp.argmax(0), 0], atol=1e-3, rtol=0)


def test_safe_tanh_transform():
    t = SafeTanhTransform()
    x = torch.tensor([-1e6, -3.0, 0.5, 1e6], requires_grad=True)
    y = t(x)
    assert torch.isfinite(y).all() and (y.abs() < 1).all()
    assert torch.isfinite(t.inv(torch.tensor([1.0, -1.0]))).all()
    z = torch.randn(50, requires_grad=True)
    (g,) = torch.autograd.grad(t(z).sum(), z)
    torch.testing.assert_close(g, 1 - torch.tanh(z.detach()) ** 2)


def test_tanh_normal_unit_bounds_of_any_shape_keep_the_shape_of_loc():
    # [-1, 1] bounds need no rescaling: a [5, 3] bound tensor does not broadcast a [5, 1] loc
    loc, scale = torch.zeros(5, 1), torch.ones(5, 1)
    d = TanhNormal(loc, scale, low=-torch.ones(5, 3), high=torch.ones(5, 3))
    a = d.rsample()
    assert a.shape == (5, 1) and d.log_prob(a).shape == (5,)
    ref = D.Normal(loc, scale).log_prob(torch.atanh(a)) - torch.log1p(-(a**2))
    torch.testing.assert_close(d.log_prob(a.clone()), ref.sum(-1), rtol=1e-4, atol=1e-4)


def test_masked_categorical_indices_soft_mask_and_cross_entropy():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    mask = torch.tensor([[True, False, True, False, True]])
    value = torch.tensor([[0, 2, 4], [4, 0, 1]])
    dense = MaskedCategorical(logits=logits, mask=mask)
    sparse = MaskedCategorical(logits=logits, indices=torch.tensor([[0, 2, 4]]))
    gather = MaskedCategorical(logits=logits, mask=mask, use_cross_entropy=False)
    ref = torch.where(mask, logits, -math.inf).log_softmax(-1)
    ref = ref.gather(-1, value.unsqueeze(-1)).squeeze(-1)
    for d in (dense, sparse, gather):
        torch.testing.assert_close(d.log_prob(value), ref)  # -inf at the masked action 1
    # a finite neg_inf is a soft mask: the masked logit is set to it
    soft = MaskedCategorical(logits=logits, mask=mask, neg_inf=-10.0)
    ref_soft = torch.where(mask, logits, torch.tensor(-10.0)).log_softmax(-1)
    torch.testing.assert_close(
        soft.log_prob(value), ref_soft.gather(-1, value.unsqueeze(-1))[..., 0]
    )
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        MaskedCategorical(logits=logits, probs=logits.softmax(-1), mask=mask)
    with pytest.raises(ValueError, match="must be provided"):
        MaskedCategorical(logits=logits)
    with pytest.raises(ValueError, match="must be provided"):
        MaskedCategorical(logits=logits, mask=mask, indices=torch.tensor([[0]]))


def test_delta_batch_and_event_shape_and_expand():
    d = Delta(torch.zeros(2, 3, 4), batch_shape=(2,), event_shape=(3, 4))
    assert d.batch_shape == (2,) and d.event_shape == (3, 4)
    other = torch.zeros(2, 3, 4)
    other[1, 0, 0] = 1
    assert d.log_prob(other).tolist() == [math.inf, -math.inf]
    e = d.expand((5, 2))
    assert e.param.shape == (5, 2, 3, 4) and e.batch_shape == (5, 2)
    assert e.log_prob(torch.zeros(5, 2, 3, 4)).shape == (5, 2)
    with pytest.raises(ValueError, match="must split"):
        Delta(torch.zeros(2, 3), batch_shape=(3,))
