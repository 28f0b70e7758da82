"""MLP options that follow TorchRL 0.14: norm built from its kwargs, per-layer kwargs, defaults."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rl_modules import MLP, NoisyLinear


def test_mlp_block_order_and_norm_built_from_kwargs_only():
    torch.manual_seed(0)
    net = MLP(
        in_features=4,
        out_features=3,
        depth=2,
        num_cells=32,
        norm_class=nn.BatchNorm1d,
        norm_kwargs={"num_features": 32},
        dropout=0.5,
        activation_class=nn.ReLU,
    )
    kinds = [type(m) for m in net]
    block = [nn.Linear, nn.Dropout, nn.BatchNorm1d, nn.ReLU]
    assert kinds == [*block, *block, nn.Linear]
    net.eval()
    x = torch.randn(6, 4)
    h = x
    for i in (0, 4):
        h = torch.relu(net[i + 2](net[i](h)))
    torch.testing.assert_close(net(x), net[8](h))


def test_mlp_lazy_norm_and_lazy_noisy_first_layer():
    net = MLP(
        out_features=(3, 10),
        depth=2,
        num_cells=32,
        norm_class=nn.LazyBatchNorm1d,
        layer_class=NoisyLinear,
    )
    assert net(torch.randn(2, 5)).shape == (2, 3, 10)
    assert type(net[0]) is NoisyLinear and net[0].in_features == 5


def test_mlp_per_layer_kwargs_and_callable_activation():
    def layer(*args, **kwargs):
        linear = nn.Linear(*args, **kwargs)
        linear.weight.data.copy_(torch.eye(4))
        return linear

    net = MLP(
        in_features=4,
        out_features=4,
        num_cells=[4, 4, 4],
        activation_class=lambda shift: lambda x: x + shift,
        activation_kwargs=[{"shift": 0}, {"shift": 1}, {"shift": 2}],
        layer_class=layer,
        layer_kwargs=[{"bias": False}] * 4,
    )
    assert all(m.bias is None for m in net if isinstance(m, nn.Linear))
    # identity layers, shifts 0 + 1 + 2
    assert (net(torch.zeros(4)) == 3).all()
    with pytest.raises(ValueError, match="activation_kwargs has 2 entries but depth is 3"):
        MLP(in_features=4, out_features=4, num_cells=[4, 4, 4], activation_kwargs=[{}, {}])


def test_mlp_default_is_one_layer_and_int_cells_need_depth():
    net = MLP(in_features=3, out_features=6)
    assert len(net) == 1 and isinstance(net[0], nn.Linear)
    assert [m.out_features for m in list(MLP(in_features=3, out_features=6, depth=2))[::2]] == [
        32,
        32,
        6,
    ]
    with pytest.raises(ValueError, match="depth is needed"):
        MLP(in_features=3, out_features=6, num_cells=8)


def test_mlp_single_bias_last_layer_adds_one_scalar():
    torch.manual_seed(0)
    net = MLP(in_features=3, out_features=4, num_cells=[5], single_bias_last_layer=True)
    last = net[2]
    assert last.bias is None
    with torch.no_grad():
        net[3].bias.fill_(0.7)
    x = torch.randn(2, 3)
    ref = last(torch.tanh(net[0](x))) + 0.7
    torch.testing.assert_close(net(x), ref)
    assert net[3].bias.shape == (1,)
