"""Value normalisers: statistics against closed forms over the concatenated batches."""

from __future__ import annotations

import pytest
import torch

from rl_modules import PopArtValueNorm, RunningValueNorm


def test_running_value_norm_equals_statistics_of_all_batches():
    torch.manual_seed(0)
    norm = RunningValueNorm(shape=2)
    batches = [torch.randn(n, 3, 2) * 4 + 1 for n in (5, 1, 17, 8)]
    for b in batches:
        norm.update(b)
    full = torch.cat([b.reshape(-1, 2) for b in batches])
    mean, var = norm.stats()
    torch.testing.assert_close(mean, full.mean(0))
    torch.testing.assert_close(var, full.var(0, correction=0))
    assert norm.count == full.shape[0]
    x = torch.randn(4, 2)
    torch.testing.assert_close(norm.normalize(x), (x - full.mean(0)) / full.std(0, correction=0))
    torch.testing.assert_close(norm.denormalize(norm.normalize(x)), x)


def test_popart_value_norm_is_a_debiased_ema():
    torch.manual_seed(0)
    beta = 0.8
    norm = PopArtValueNorm(shape=1, beta=beta)
    batches = [torch.randn(16, 1) * 3 + 2 for _ in range(5)]
    for b in batches:
        norm.update(b)
    t = len(batches)
    weights = torch.tensor([beta ** (t - 1 - i) * (1 - beta) for i in range(t)])
    debias = 1 - beta**t
    means = torch.stack([b.mean() for b in batches])
    sqs = torch.stack([b.square().mean() for b in batches])
    mean = (weights * means).sum() / debias
    var = (weights * sqs).sum() / debias - mean**2
    got_mean, got_var = norm.stats()
    torch.testing.assert_close(got_mean, mean.reshape(1))
    torch.testing.assert_close(got_var, var.reshape(1))
    # one batch: the debiased statistics are that batch's own
    one = PopArtValueNorm(beta=0.99999)
    one.update(batches[0])
    torch.testing.assert_close(one.stats()[0], batches[0].mean(0), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(
        one.stats()[1], batches[0].var(0, correction=0), rtol=1e-3, atol=1e-3
    )


def test_value_norm_normalize_is_differentiable_and_state_dict_round_trips():
    norm = PopArtValueNorm(beta=0.9)
    norm.update(torch.randn(32, 1) * 5)
    x = torch.randn(4, 1, requires_grad=True)
    norm.normalize(x).sum().backward()
    torch.testing.assert_close(x.grad, 1 / norm.stats()[1].sqrt().expand(4, 1))
    other = PopArtValueNorm(beta=0.9)
    other.load_state_dict(norm.state_dict())
    torch.testing.assert_close(other.stats(), norm.stats())


@pytest.mark.parametrize("cls", [PopArtValueNorm, RunningValueNorm])
def test_value_norm_refuses_wrong_trailing_shape(cls):
    norm = cls(shape=1)
    with pytest.raises(ValueError, match=r"expected values \[\.\.\., 1\], got \(4, 3\)"):
        norm.update(torch.randn(4, 3))


def test_popart_output_layer_preserves_the_critic_outputs():
    torch.manual_seed(0)
    body = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh())
    head = torch.nn.Linear(8, 1)
    norm = PopArtValueNorm(beta=0.7, output_layer=head)
    h = body(torch.randn(32, 5)).detach()
    # before any statistics the head's output is read on the (0, 1) scale
    before = head(h).detach()
    norm.update(torch.randn(64, 1) * 7 + 3)
    torch.testing.assert_close(norm.denormalize(head(h)), before, rtol=1e-5, atol=1e-5)
    for scale in (0.5, 20.0):
        before = norm.denormalize(head(h)).detach()
        var = norm.stats()[1]
        norm.update(torch.randn(64, 1) * scale - 10)
        assert not torch.allclose(norm.stats()[1], var)  # the statistics did move
        torch.testing.assert_close(norm.denormalize(head(h)), before, rtol=1e-4, atol=1e-4)
    assert "output_layer" not in dict(norm.named_modules())  # the critic owns the layer
    with pytest.raises(ValueError, match="2 outputs"):
        PopArtValueNorm(output_layer=torch.nn.Linear(8, 2))
