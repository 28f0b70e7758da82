"""Ordinal / OneHotOrdinal against eq. 4 of Tang and Agrawal (2020) written as an explicit double loop."""

from __future__ import annotations

import math

import pytest
import torch

from rl_modules import OneHotOrdinal, Ordinal


def _reference_logits(scores: torch.Tensor) -> torch.Tensor:
    n = scores.shape[-1]
    out = torch.empty_like(scores)
    for k in range(n):
        total = 0.0
        for i in range(n):
            s = scores[..., i]
            total = total + (
                torch.log(torch.sigmoid(s)) if i <= k else torch.log(1 - torch.sigmoid(s))
            )
        out[..., k] = total
    return out


def test_ordinal_logits_match_the_paper_and_a_known_value():
    scores = torch.randn(3, 6, dtype=torch.float64)
    d = Ordinal(scores=scores)
    ref = _reference_logits(scores)
    torch.testing.assert_close(d.logits, ref - ref.logsumexp(-1, keepdim=True))
    # all scores 1: l_k = (k + 1) log sigmoid(1) + (n - k - 1) log sigmoid(-1)
    ones = Ordinal(scores=torch.ones(4)).logits
    raw = torch.tensor(
        [
            (k + 1) * math.log(1 / (1 + math.exp(-1))) + (3 - k) * math.log(1 / (1 + math.e))
            for k in range(4)
        ]
    )
    torch.testing.assert_close(ones, raw - raw.logsumexp(-1))


def test_shapes_ranges_and_finite_gradients():
    d = Ordinal(scores=torch.randn(5, 10, 20))
    a = d.sample()
    assert a.shape == (5, 10) and d.log_prob(a).shape == (5, 10)
    assert int(a.min()) >= 0 and int(a.max()) < 20
    oh = OneHotOrdinal(scores=torch.randn(5, 10, 20))
    s = oh.sample()
    assert s.shape == (5, 10, 20) and bool((s.sum(-1) == 1).all())
    scores = torch.tensor(
        [[1.0, 0.0, torch.finfo().max], [1.0, 0.0, torch.finfo().min]], requires_grad=True
    )
    for dist in (Ordinal(scores=scores), OneHotOrdinal(scores=scores)):
        dist.log_prob(dist.sample()).sum().backward()
        assert not torch.isnan(scores.grad).any()


@pytest.mark.parametrize("use_vmap", [False, True])
def test_safe_tanh_atanh_round_trip_has_unit_gradient_even_when_saturated(use_vmap):
    from rl_modules import safeatanh, safetanh

    x = (torch.linspace(-25, 25, 11, dtype=torch.double)).requires_grad_(True)
    if use_vmap:
        y = torch.vmap(safetanh, (0, None))(x, 1e-6)
        back = torch.vmap(safeatanh, (0, None))(y, 1e-6)
    else:
        y, back = safetanh(x, 1e-6), None
        back = safeatanh(y, 1e-6)
    assert bool((y.abs() <= 1 - 1e-6).all())
    back.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones_like(x))
    # away from saturation, plain tanh / atanh
    z = torch.tensor([-0.5, 0.3], dtype=torch.double)
    torch.testing.assert_close(safetanh(z, 1e-6), z.tanh())
    torch.testing.assert_close(safeatanh(z, 1e-6), z.atanh())
