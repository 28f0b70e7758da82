"""TanhNormal with tensor bounds traces into one graph under torch.compile (no graph break
on reading the bounds), with the log-probabilities of the change-of-variables formula."""

from __future__ import annotations

import pytest
import torch
from torch import distributions as D

from rl_modules import TanhNormal


def reference_log_prob(y, loc, scale, low, high):
    """log N(atanh(u); loc, scale) - log(half * (1 - u^2)), u = (y - mid) / half, summed."""
    half, mid = (high - low) / 2, (high + low) / 2
    u = ((y - mid) / half).double()
    log_det = torch.log(half.double() * (1 - u**2))
    return (D.Normal(loc.double(), scale.double()).log_prob(torch.atanh(u)) - log_det).sum(-1)


@pytest.mark.parametrize(("lo", "hi"), [(-1.0, 1.0), (-2.0, 0.5)])
def test_tanh_normal_with_tensor_bounds_compiles_in_one_graph(lo: float, hi: float) -> None:
    low, high = torch.full((3,), lo), torch.full((3,), hi)

    def log_prob(loc, scale, y):
        return TanhNormal(loc, scale, low=low, high=high).log_prob(y)

    torch._dynamo.reset()
    compiled = torch.compile(log_prob, fullgraph=True, backend="eager")  # a break raises
    gen = torch.Generator().manual_seed(0)
    loc, scale = torch.randn(5, 3, generator=gen), torch.rand(5, 3, generator=gen) + 0.5
    y = lo + (hi - lo) * torch.rand(5, 3, generator=gen).clamp(0.05, 0.95)
    expected = reference_log_prob(y, loc, scale, low, high).float()
    torch.testing.assert_close(compiled(loc, scale, y), expected, rtol=1e-4, atol=1e-4)
