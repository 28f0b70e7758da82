"""hold_out_net: no gradient into a network's weights inside the block, nested blocks restore."""

from __future__ import annotations

import torch

from rl_objectives.utils import hold_out_net


def test_weights_get_no_gradient_inputs_still_do():
    net = torch.nn.Linear(3, 1)
    x = torch.randn(2, 3, requires_grad=True)
    with hold_out_net(net):
        net(x).sum().backward()
    assert net.weight.grad is None and x.grad is not None
    net(x).sum().backward()
    assert net.weight.grad is not None


def test_nested_blocks_and_frozen_parameters_are_restored():
    net = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 1))
    net[0].bias.requires_grad_(False)  # frozen by the user: stays frozen after the block
    with hold_out_net(net):
        with hold_out_net(net):
            assert not net(torch.ones(1, 3)).requires_grad
        assert not net(torch.ones(1, 3)).requires_grad
    assert net(torch.ones(1, 3)).requires_grad
    assert not net[0].bias.requires_grad and net[0].weight.requires_grad
    with hold_out_net(torch.nn.Sequential()):
        pass
