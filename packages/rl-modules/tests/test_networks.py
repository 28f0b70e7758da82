"""Networks: shapes, layer structure and numerics against plain torch."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rl_modules import (
    MLP,
    ConvNet,
    DdpgMlpActor,
    DdpgMlpQNet,
    DuelingCnnDQNet,
    NoisyLinear,
    SquashDims,
    reset_noise,
)


def test_mlp_structure_and_output_against_plain_layers():
    torch.manual_seed(0)
    net = MLP(in_features=4, out_features=3, num_cells=[8, 6], activation_class=nn.ReLU)
    linears = [m for m in net if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(4, 8), (8, 6), (6, 3)]
    x = torch.randn(5, 4)
    ref = linears[2](torch.relu(linears[1](torch.relu(linears[0](x)))))
    torch.testing.assert_close(net(x), ref)


def test_mlp_options():
    net = MLP(
        out_features=(2, 3),
        depth=2,
        num_cells=16,
        norm_class=nn.LayerNorm,
        norm_kwargs={"normalized_shape": 16},
        dropout=0.1,
    )
    assert net(torch.randn(7, 5)).shape == torch.Size([7, 2, 3])
    assert sum(isinstance(m, nn.LayerNorm) for m in net) == 2
    assert sum(isinstance(m, nn.Dropout) for m in net) == 2
    net = MLP(
        in_features=3,
        out_features=2,
        depth=1,
        num_cells=4,
        bias_last_layer=False,
        activate_last_layer=True,
    )
    assert net[-2].bias is None and isinstance(net[-1], nn.Tanh)
    assert MLP(in_features=2, out_features=1, depth=0)(torch.zeros(1, 2)).shape == (1, 1)
    noisy = MLP(in_features=3, out_features=2, num_cells=[4], layer_class=NoisyLinear)
    assert sum(isinstance(m, NoisyLinear) for m in noisy) == 2
    assert MLP(in_features=2, out_features=1, num_cells=[4])(
        torch.zeros(3, 1), torch.zeros(3, 1)
    ).shape == (3, 1)


def test_mlp_errors():
    with pytest.raises(ValueError, match="out_features"):
        MLP(in_features=3)
    with pytest.raises(ValueError, match="depth"):
        MLP(in_features=3, out_features=1, depth=2, num_cells=[4, 4, 4])


def test_convnet_batch_dims_and_squash():
    net = ConvNet(in_features=3, num_cells=[4, 8], kernel_sizes=[3, 3], strides=[2, 1])
    x = torch.randn(2, 5, 3, 16, 16)
    out = net(x)
    ref = net(x.reshape(10, 3, 16, 16)).reshape(2, 5, -1)
    torch.testing.assert_close(out, ref)
    assert out.shape == torch.Size([2, 5, 8 * 5 * 5])
    assert SquashDims(2)(torch.zeros(3, 4, 5)).shape == (3, 20)
    with pytest.raises(ValueError, match=r"\[\*B, C, H, W\]"):
        net(torch.zeros(3, 4))


def test_dueling_q_is_value_plus_centred_advantage():
    torch.manual_seed(0)
    net = DuelingCnnDQNet(
        4,
        cnn_kwargs={"num_cells": [4], "kernel_sizes": [4], "strides": [4]},
        mlp_kwargs={"num_cells": 8},
    )
    x = torch.randn(3, 3, 16, 16)
    q = net(x)
    feats = net.features(x)
    adv, val = net.advantage(feats), net.value(feats)
    torch.testing.assert_close(q, val + adv - adv.mean(-1, keepdim=True))
    torch.testing.assert_close(q.mean(-1, keepdim=True), val)


def test_ddpg_networks():
    actor = DdpgMlpActor(2, {"in_features": 5})
    assert actor(torch.randn(4, 5)).shape == (4, 2)
    last = [m for m in actor.modules() if isinstance(m, nn.Linear)][-1]
    assert last.weight.abs().max() <= 6e-3
    q = DdpgMlpQNet(
        mlp_net_kwargs_net1={"in_features": 5}, mlp_net_kwargs_net2={"in_features": 402}
    )
    assert q(torch.randn(4, 5), torch.randn(4, 2)).shape == (4, 1)


def test_noisy_linear_train_eval_and_reset():
    torch.manual_seed(0)
    layer = NoisyLinear(4, 3, std_init=0.5, use_exploration_type=False)
    x = torch.randn(2, 4)
    layer.eval()
    torch.testing.assert_close(layer(x), x @ layer.weight_mu.T + layer.bias_mu)
    layer.train()
    w = layer.weight_mu + layer.weight_sigma * layer.weight_epsilon
    torch.testing.assert_close(
        layer(x), x @ w.T + layer.bias_mu + layer.bias_sigma * layer.bias_epsilon
    )
    # Factorised noise: rank one.
    assert torch.linalg.matrix_rank(layer.weight_epsilon) == 1
    before = layer.weight_epsilon.clone()
    layer.reset_noise()
    assert not torch.equal(before, layer.weight_epsilon)
    assert len(list(layer.parameters())) == 4


def test_state_independent_scale_is_tensordicts_learned_parameter() -> None:
    from tensordict.nn import AddStateIndependentNormalScale as FromTensordict

    from rl_modules import AddStateIndependentNormalScale

    assert AddStateIndependentNormalScale is FromTensordict  # one implementation, re-exported
    module = AddStateIndependentNormalScale(2, init_value=-1.0)
    _, scale = module(torch.randn(7, 2))
    torch.testing.assert_close(scale, torch.full((7, 2), torch.exp(torch.tensor(-1.0)).item()))


def test_noisy_linear_noise_follows_the_exploration_type_by_default():
    from rl_modules import ExplorationType, set_exploration_type

    torch.manual_seed(0)
    layer = NoisyLinear(4, 3)
    torch.testing.assert_close(layer.weight_sigma, torch.full((3, 4), 0.5 / 2))
    torch.testing.assert_close(layer.bias_sigma, torch.full((3,), 0.5 / 3**0.5))
    x = torch.randn(2, 4)
    plain = x @ layer.weight_mu.T + layer.bias_mu
    torch.testing.assert_close(layer(x), plain)  # training mode alone adds no noise
    with set_exploration_type(ExplorationType.RANDOM):
        w = layer.weight_mu + layer.weight_sigma * layer.weight_epsilon
        noisy = x @ w.T + layer.bias_mu + layer.bias_sigma * layer.bias_epsilon
        torch.testing.assert_close(layer(x), noisy)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        torch.testing.assert_close(layer(x), plain)


def test_reset_noise_redraws_every_noisy_layer():
    torch.manual_seed(0)
    net = nn.Sequential(NoisyLinear(4, 8), nn.ReLU(), NoisyLinear(8, 2))
    before = [m.weight_epsilon.clone() for m in (net[0], net[2])]
    reset_noise(net)
    for m, eps in zip((net[0], net[2]), before, strict=True):
        assert (m.weight_epsilon != eps).any()
        # factorised Gaussian noise: an outer product, so rank 1
        assert torch.linalg.matrix_rank(m.weight_epsilon) == 1
