"""Multi-agent nets against a loop of separate MLPs; Ensemble against a loop of copies."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.func import functional_call

from rl_modules import MLP, Ensemble, MultiAgentConvNet, MultiAgentMLP, MultiAgentNetBase


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _agent_mlp(net: MultiAgentMLP, agent: int) -> nn.Module:
    """A stand-alone MLP holding agent ``agent``'s slice of the stacked parameters."""
    template = copy.deepcopy(net.agent_nets._template[0]).to_empty(device="cpu")
    params = {k: v[agent] for k, v in net.agent_nets.tensors().items()}
    template.load_state_dict(params)
    return template


@pytest.mark.parametrize("centralized", [False, True])
@pytest.mark.parametrize("share_params", [False, True])
def test_multiagent_mlp_against_loop(centralized, share_params):
    torch.manual_seed(0)
    n_agents, n_in, n_out = 3, 4, 2
    net = MultiAgentMLP(
        n_in,
        n_out,
        n_agents,
        centralized=centralized,
        share_params=share_params,
        depth=2,
        num_cells=8,
    )
    single = MLP(
        in_features=n_in * (n_agents if centralized else 1),
        out_features=n_out,
        depth=2,
        num_cells=8,
    )
    expected = _count(single) * (1 if share_params else n_agents)
    assert _count(net) == expected
    x = torch.randn(5, 7, n_agents, n_in)
    out = net(x)
    assert out.shape == (5, 7, n_agents, n_out)
    joint = x.flatten(-2)
    for a in range(n_agents):
        agent_net = net.net if share_params else _agent_mlp(net, a)
        inp = joint if centralized else x[..., a, :]
        torch.testing.assert_close(out[..., a, :], agent_net(inp), rtol=1e-5, atol=1e-6)
    if not share_params:
        # Independent initialisation: agents differ.
        assert not torch.allclose(out[..., 0, :], out[..., 1, :])


def test_multiagent_mlp_gradients_reach_each_agent():
    net = MultiAgentMLP(4, 2, 3, centralized=False, share_params=False, num_cells=[8])
    x = torch.randn(6, 3, 4)
    net(x)[:, 1].sum().backward()
    grads = net.agent_nets.params[0].grad
    assert grads[1].abs().sum() > 0 and grads[0].abs().sum() == 0 and grads[2].abs().sum() == 0


def test_multiagent_mlp_bad_input():
    net = MultiAgentMLP(4, 2, 3, centralized=False, share_params=True)
    with pytest.raises(ValueError, match="n_agents=3"):
        net(torch.randn(5, 2, 4))


@pytest.mark.parametrize("centralized", [False, True])
@pytest.mark.parametrize("share_params", [False, True])
def test_multiagent_convnet_against_loop(centralized, share_params):
    torch.manual_seed(0)
    net = MultiAgentConvNet(
        2,
        centralized=centralized,
        share_params=share_params,
        in_features=3,
        num_cells=[4],
        kernel_sizes=3,
    )
    x = torch.randn(5, 2, 3, 8, 8)
    out = net(x)
    assert out.shape == (5, 2, 4 * 6 * 6)
    for a in range(2):
        if share_params:
            agent_net = net.net
        else:
            agent_net = copy.deepcopy(net.agent_nets._template[0]).to_empty(device="cpu")
            agent_net.load_state_dict({k: v[a] for k, v in net.agent_nets.tensors().items()})
        inp = x.flatten(1, 2) if centralized else x[:, a]
        torch.testing.assert_close(out[:, a], agent_net(inp), rtol=1e-5, atol=1e-6)


def test_ensemble_matches_loop_over_members():
    torch.manual_seed(0)
    qnet = MLP(in_features=5, out_features=1, num_cells=[8, 8])
    ens = Ensemble(qnet, num_copies=4)
    x = torch.randn(10, 5)
    out = ens(x)
    assert out.shape == (4, 10, 1)
    for i in range(4):
        params = {k: v[i] for k, v in ens.stacked.tensors().items()}
        torch.testing.assert_close(out[i], functional_call(qnet, params, (x,)))
    assert _count(ens) == 4 * _count(qnet)
    split = Ensemble(
        lambda: MLP(in_features=5, out_features=1, num_cells=[8]), 3, split_input_dim=0
    )
    assert split(torch.randn(3, 10, 5)).shape == (3, 10, 1)
    with pytest.raises(ValueError, match="num_copies=3"):
        split(torch.randn(2, 10, 5))
    lazy = Ensemble(MLP(out_features=1, num_cells=[4]), 2)  # sized by the first call
    assert lazy(torch.randn(7, 3)).shape == (2, 7, 1)
    assert lazy.stacked.params[0].shape == (2, 4, 3)


def test_lazy_multiagent_mlp_materialises_in_place_for_an_early_optimizer():
    torch.manual_seed(0)
    net = MultiAgentMLP(None, 6, 3, centralized=True, share_params=False, depth=2)
    uninit = torch.nn.parameter.UninitializedParameter
    assert any(isinstance(p, uninit) for p in net.parameters())
    optim = torch.optim.SGD(net.parameters(), lr=0.1)
    obs = torch.randn(10, 3, 4)
    out = net(obs)
    assert out.shape == (10, 3, 6)
    assert not any(isinstance(p, uninit) for p in net.parameters())
    # each agent's network sees the 12 joint features, with its own parameters
    tensors = net.agent_nets.tensors()
    assert tensors["0.weight"].shape == (3, 32, 12)
    assert not torch.allclose(tensors["0.weight"][0], tensors["0.weight"][1])
    template = MLP(in_features=12, out_features=6, depth=2)
    for agent in range(3):
        ref = functional_call(
            template, {k: v[agent] for k, v in tensors.items()}, (obs.flatten(-2),)
        )
        torch.testing.assert_close(out[:, agent], ref)
    before = tensors["0.weight"].detach().clone()
    out.mean().backward()
    optim.step()
    assert not torch.equal(net.agent_nets.tensors()["0.weight"], before)
    shared = MultiAgentMLP(None, 2, 3, centralized=False, share_params=True, num_cells=[5])
    assert shared(torch.randn(4, 3, 7)).shape == (4, 3, 2)


@pytest.mark.parametrize("share_params", [True, False])
def test_params_view_and_reset_parameters(share_params):
    torch.manual_seed(0)
    net = MultiAgentMLP(
        4, 2, n_agents=3, centralized=False, share_params=share_params, num_cells=[8]
    )
    params = net.params
    assert params.batch_size == (() if share_params else (3,))
    x = torch.randn(5, 3, 4)
    before, out_before = params.clone(), net(x)
    net.reset_parameters()
    after = net.params
    # every entry re-drawn, in place (the view reads the live parameters)
    assert not before.apply(torch.isclose, after, batch_size=[]).any()
    assert not torch.allclose(net(x), out_before)
    if not share_params:
        # agents re-drawn independently; agent 1's output uses agent 1's slice
        assert not after[0].apply(torch.isclose, after[1], batch_size=[]).any()
        torch.testing.assert_close(net(x)[:, 1], _agent_mlp(net, 1)(x[:, 1]))


def test_repr_names_the_per_agent_net_and_the_options():
    net = MultiAgentMLP(4, 2, n_agents=3, centralized=True, share_params=False, num_cells=[8])
    text = repr(net)
    assert text.startswith(
        "MultiAgentMLP(\n    MLP(\n      (0): Linear(in_features=12, out_features=8"
    )
    assert text.endswith(
        "n_agents=3,\n    share_params=False,\n    centralized=True,\n    agent_dim=-2)"
    )


@pytest.mark.parametrize("centralized", [True, False])
def test_lazy_multiagent_convnet_sizes_itself_on_the_first_call(centralized):
    torch.manual_seed(0)
    net = MultiAgentConvNet(
        2,
        centralized=centralized,
        share_params=False,
        in_features=None,
        num_cells=[4],
        kernel_sizes=3,
    )
    out = net(torch.randn(5, 2, 3, 6, 6))
    assert out.shape == (5, 2, 4 * 4 * 4)
    assert net.agent_dim == -4 and net.params.batch_size == (2,)
    first_conv = net.params["layers", "0", "weight"]
    assert first_conv.shape == (2, 4, 3 * (2 if centralized else 1), 3, 3)
    assert not torch.allclose(first_conv[0], first_conv[1])


@pytest.mark.parametrize("agent_dim", [1, -3])
def test_custom_net_with_the_agent_dim_anywhere(agent_dim):
    class PerAgent(MultiAgentNetBase):
        def _build_single_net(self, *, device, **kwargs):
            return nn.Linear(5, 2, device=device)

    torch.manual_seed(0)
    net = PerAgent(n_agents=3, centralized=False, share_params=False, agent_dim=agent_dim)
    x = torch.randn(4, 3, 6, 5)  # agents on dim 1, a time dim after them
    out = net(x)
    assert out.shape == (4, 3, 6, 2)
    for i in range(3):
        torch.testing.assert_close(out[:, i], _agent_mlp(net, i)(x[:, i]))
    with pytest.raises(ValueError, match="n_agents=3 entries on the agent dim"):
        net(torch.randn(4, 2, 6, 5))
    with pytest.raises(NotImplementedError, match="_centralise"):
        PerAgent(n_agents=3, centralized=True, share_params=False, agent_dim=1)
