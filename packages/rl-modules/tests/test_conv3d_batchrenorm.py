"""Conv3dNet against plain nn.Conv3d layers, BatchRenorm1d against BatchNorm1d and the paper's formula."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rl_modules import BatchRenorm1d, Conv3dNet, ConvNet


def test_conv3dnet_matches_plain_layers_with_batch_dims():
    torch.manual_seed(0)
    net = Conv3dNet(in_features=2, num_cells=[4, 6], kernel_sizes=3, strides=[2, 1], paddings=1)
    convs = [m for m in net.modules() if isinstance(m, nn.Conv3d)]
    assert [(c.in_channels, c.out_channels, c.stride) for c in convs] == [
        (2, 4, (2, 2, 2)),
        (4, 6, (1, 1, 1)),
    ]
    x = torch.randn(3, 2, 2, 6, 6, 6)
    flat = x.reshape(6, 2, 6, 6, 6)
    ref = nn.functional.elu(convs[1](nn.functional.elu(convs[0](flat)))).flatten(1)
    torch.testing.assert_close(net(x), ref.reshape(3, 2, -1))
    with pytest.raises(ValueError, match="at least 4 dimensions"):
        net(torch.randn(3, 16, 16))


def test_conv3dnet_defaults_lazy_and_norm_kwargs():
    net = Conv3dNet(norm_class=nn.BatchNorm3d, norm_kwargs={"num_features": 32})
    assert net(torch.randn(2, 5, 10, 10, 10)).shape == (2, 32 * 4 * 4 * 4)
    conv2 = ConvNet(in_features=3, norm_class=nn.BatchNorm2d, norm_kwargs={"num_features": 32})
    assert conv2(torch.randn(2, 3, 8, 8)).shape == (2, 32 * 2 * 2)


def test_conv3dnet_errors():
    with pytest.raises(ValueError, match="Null depth is not permitted"):
        Conv3dNet(in_features=5, num_cells=32, depth=0)
    with pytest.raises(ValueError, match="depth=None requires one of the input args"):
        Conv3dNet(in_features=5, num_cells=32, depth=None)
    with pytest.raises(ValueError, match="specifying a constant num_cells"):
        Conv3dNet(in_features=5, num_cells=[32], depth=None, kernel_sizes=[3, 3])


@pytest.mark.parametrize("smooth", [False, True])
def test_batchrenorm_is_batchnorm_during_warmup_then_renormalises(smooth):
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(5, momentum=0.1)
    brn = BatchRenorm1d(5, momentum=0.1, warmup_steps=3, max_r=1e4, max_d=1e4, smooth=smooth)
    batches = (torch.randn(100, 5) * 3 + 1).split(20)
    for i, x in enumerate(batches):
        mean, var = brn.running_mean.clone(), brn.running_var.clone()
        out = brn(x)
        ref_bn = bn(x)
        if (i < 3 and not smooth) or (i == 0 and smooth):
            torch.testing.assert_close(out, ref_bn)
        factor = min(i / 3, 1.0) if smooth else float(i >= 3)
        std_b = (x.var(0, unbiased=False) + 1e-5).sqrt()
        std = (var + 1e-5).sqrt()
        r = 1 + (std_b / std - 1) * factor
        d = (x.mean(0) - mean) / std * factor
        torch.testing.assert_close(out, (x - x.mean(0)) / std_b * r + d)
    bn.eval()
    brn.eval()
    test = torch.randn(10, 5)
    torch.testing.assert_close(brn(test), bn(test))


def test_batchrenorm_clips_and_checks_shape():
    brn = BatchRenorm1d(2, warmup_steps=0, max_r=1.5, max_d=0.5)
    x = torch.tensor([[10.0, -10.0], [30.0, 10.0]])
    out = brn(x)
    std_b = (x.var(0, unbiased=False) + 1e-5).sqrt()
    ref = (x - x.mean(0)) / std_b * 1.5 + torch.tensor([0.5, 0.0])
    torch.testing.assert_close(out, ref)
    with pytest.raises(ValueError, match=r"\[N, 2, \*\]"):
        brn(torch.zeros(3, 4))
