"""Value transforms against their closed forms (Pohlen et al., 2018; DreamerV3)."""

from __future__ import annotations

import math

import pytest
import torch

from rl_modules import (
    ComposeValueTransform,
    IdentityValueTransform,
    SignedHyperbolicValueTransform,
    SymLogValueTransform,
    ValueTransform,
    functional,
    signed_hyperbolic,
    signed_parabolic,
    symexp,
    symlog,
)

VALUES = [-1e6, -100.0, -1.0, -1e-6, 0.0, 1e-6, 1.0, 100.0, 1e6]


def test_signed_hyperbolic_and_its_inverse_match_the_textbook_formulas():
    eps = 1e-2
    x = torch.tensor(VALUES, dtype=torch.float64)
    h = [math.copysign(math.sqrt(abs(v) + 1) - 1, v) + eps * v for v in VALUES]
    torch.testing.assert_close(signed_hyperbolic(x, eps), torch.tensor(h, dtype=torch.float64))
    # h^-1(y) = sign(y) (((sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps))^2 - 1)
    inv = [
        math.copysign(((math.sqrt(1 + 4 * eps * (abs(y) + 1 + eps)) - 1) / (2 * eps)) ** 2 - 1, y)
        for y in h
    ]
    got = signed_parabolic(torch.tensor(h, dtype=torch.float64), eps)
    torch.testing.assert_close(got, torch.tensor(inv, dtype=torch.float64), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(got, x, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    "transform",
    [
        IdentityValueTransform(),
        SymLogValueTransform(),
        SignedHyperbolicValueTransform(),
        ComposeValueTransform(SignedHyperbolicValueTransform(), SymLogValueTransform()),
    ],
)
def test_round_trip(transform):
    x = torch.tensor(VALUES, dtype=torch.float64)
    y = transform(x)
    assert y.dtype == x.dtype and y.shape == x.shape
    torch.testing.assert_close(transform.inverse(y), x, rtol=1e-8, atol=1e-8)


def test_compose_applies_in_order_and_inverts_in_reverse():
    first, second = SignedHyperbolicValueTransform(epsilon=1e-2), SymLogValueTransform()
    x = torch.tensor([-10.0, 0.0, 10.0])
    t = ComposeValueTransform(first, second)
    torch.testing.assert_close(t(x), torch.log1p(signed_hyperbolic(x, 1e-2).abs()) * x.sign())


def test_gradient_at_zero_is_the_derivative():
    # sign(x) * f(|x|) would give 0 here; h'(0) = 1/2 + eps, symlog'(0) = symexp'(0) = 1.
    x = torch.zeros(3, requires_grad=True)
    (g,) = torch.autograd.grad(signed_hyperbolic(x, 1e-3).sum(), x)
    torch.testing.assert_close(g, torch.full((3,), 0.501))
    for f in (symlog, symexp, lambda v: signed_parabolic(v, 1e-3)):
        (g,) = torch.autograd.grad(f(x).sum(), x)
        assert (g > 0).all()
    (g,) = torch.autograd.grad(symlog(x).sum(), x)
    torch.testing.assert_close(g, torch.ones(3))


def test_functional_namespace_and_errors():
    assert functional.symlog is symlog and functional.signed_parabolic is signed_parabolic
    with pytest.raises(TypeError, match="abstract"):
        ValueTransform()
    with pytest.raises(ValueError, match="epsilon must be positive"):
        SignedHyperbolicValueTransform(epsilon=0)
    with pytest.raises(ValueError, match="epsilon must be positive"):
        signed_hyperbolic(torch.zeros(1), epsilon=-1)
    with pytest.raises(ValueError, match="at least one"):
        ComposeValueTransform()
    with pytest.raises(TypeError, match="ValueTransform"):
        ComposeValueTransform(torch.nn.Identity())
