"""CrossQ against plain torch with batch-norm critics (values, gradients, running statistics)."""

from __future__ import annotations

import copy

import pytest
import torch
from objectives_testlib import ACT, OBS, make_normal_actor, transitions
from tensordict.nn import TensorDictModule
from torch import nn

from rl_objectives import CrossQLoss


class BNQ(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.BatchNorm1d(OBS + ACT), nn.Linear(OBS + ACT, 8), nn.BatchNorm1d(8), nn.ReLU(),
            nn.Linear(8, 1),
        )  # fmt: skip

    def forward(self, obs, act):
        return self.net(torch.cat([obs, act], -1))


def _bn_qvalue():
    return TensorDictModule(BNQ(), ["observation", "action"], ["state_action_value"])


def test_crossq_matches_plain_torch_values_gradients_and_stats():
    actor = make_normal_actor()
    loss = CrossQLoss(actor, _bn_qvalue(), gamma=0.9, alpha_init=0.5, loss_function="l2")
    assert not any("target" in n for n, _ in loss.named_buffers())  # no target networks
    ref_nets = [copy.deepcopy(net.module) for net in loss.qvalue_network]
    td = transitions(16)
    torch.manual_seed(2)
    out = loss(td)
    torch.manual_seed(2)
    obs, act, nobs = td["observation"], td["action"], td["next", "observation"]

    def dist(o):
        loc, scale = actor.module[0].module(o)
        return actor.module[1].distribution_class(loc, scale)

    with torch.no_grad():
        nd = dist(nobs)
        na = nd.rsample()
        nlp = nd.log_prob(na)
    joint = [q(torch.cat([obs, nobs]), torch.cat([act, na])).squeeze(-1) for q in ref_nets]
    pred = torch.stack([j[:16] for j in joint])
    nq = torch.stack([j[16:] for j in joint]).amin(0)
    y = (td["next", "reward"].squeeze(-1) + 0.9 * (~td["next", "terminated"]).squeeze(-1)
         * (nq - 0.5 * nlp)).detach()  # fmt: skip
    ref_q = ((pred - y) ** 2).sum(0).mean()
    d = dist(obs)
    a_new = d.rsample()
    lp = d.log_prob(a_new)
    for q in ref_nets:
        q.eval()
    q_new = torch.stack(
        [
            torch.func.functional_call(
                q, {k: v.detach() for k, v in q.state_dict().items()}, (obs, a_new)
            ).squeeze(-1)
            for q in ref_nets
        ]
    ).amin(0)
    ref_actor = (0.5 * lp - q_new).mean()
    torch.testing.assert_close(out["loss_qvalue"], ref_q)
    torch.testing.assert_close(out["loss_actor"], ref_actor)
    torch.testing.assert_close(out["loss_alpha"], (-loss.log_alpha * (lp.detach() - 2.0)).mean())
    torch.testing.assert_close(td["td_error"], (pred - y).abs().amax(0).detach())
    # running statistics: updated once, by the joint pass only; modules back in train mode
    for net, ref in zip(loss.qvalue_network, ref_nets, strict=True):
        bn, bn_ref = net.module.net[0], ref.net[0]
        torch.testing.assert_close(bn.running_mean, bn_ref.running_mean)
        assert int(bn.num_batches_tracked) == 1 and bn.training
    params = [*loss.actor_network.parameters(), *loss.qvalue_network.parameters()]
    ref_params = [*loss.actor_network.parameters(), *(p for q in ref_nets for p in q.parameters())]
    ours = torch.autograd.grad(out["loss_qvalue"] + out["loss_actor"], params)
    theirs = torch.autograd.grad(ref_q + ref_actor, ref_params)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b)


def test_crossq_gradient_isolation_and_eval_mode_kept():
    loss = CrossQLoss(make_normal_actor(), _bn_qvalue(), target_entropy=-2.0)
    loss.eval()
    out = loss(transitions(8))
    assert not any(m.training for m in loss.qvalue_network.modules())  # the caller's mode kept
    loss.train()
    out = loss(transitions(8))
    out["loss_actor"].backward(retain_graph=True)
    assert all(p.grad is None for p in loss.qvalue_network.parameters())
    assert all(p.grad is not None for p in loss.actor_network.parameters())
    loss.zero_grad(set_to_none=True)
    out["loss_qvalue"].backward()
    assert all(p.grad is None for p in loss.actor_network.parameters())
    assert all(p.grad is not None for p in loss.qvalue_network.parameters())


def test_crossq_errors():
    with pytest.raises(TypeError, match="get_dist"):
        CrossQLoss(_bn_qvalue(), _bn_qvalue())
    loss = CrossQLoss(make_normal_actor(), _bn_qvalue())
    td = transitions(8)
    del td["next", "observation"]
    with pytest.raises(KeyError, match="observation"):
        loss(td)
    bad = TensorDictModule(
        nn.Sequential(nn.Linear(OBS, 2)), ["observation"], ["state_action_value"]
    )
    with pytest.raises(ValueError, match="expected \\(16, 1\\)"):
        CrossQLoss(make_normal_actor(), bad)(transitions(8))


@pytest.mark.parametrize("separate_losses", [False, True])
def test_crossq_shared_trunk(separate_losses):
    from tensordict.nn import (
        NormalParamExtractor,
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
        TensorDictSequential,
    )
    from torch import distributions as D

    def normal(loc, scale):
        return D.Independent(D.Normal(loc, scale), 1)

    common = TensorDictModule(nn.Linear(OBS, 8), ["observation"], ["hidden"])
    actor = ProbabilisticTensorDictSequential(
        common,
        TensorDictModule(nn.Sequential(nn.Linear(8, 2 * ACT), NormalParamExtractor()),
                         ["hidden"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=normal),
    )  # fmt: skip

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.BatchNorm1d(8 + ACT), nn.Linear(8 + ACT, 1))

        def forward(self, hidden, act):
            return self.net(torch.cat([hidden, act], -1))

    critic = TensorDictSequential(
        common, TensorDictModule(Head(), ["hidden", "action"], ["state_action_value"])
    )
    loss = CrossQLoss(actor, critic, separate_losses=separate_losses, target_entropy=-2.0)
    out = loss(transitions(8))
    out["loss_qvalue"].backward()
    trunk_grad = common.module.weight.grad
    # the actor's trunk is never trained by the critic loss
    assert trunk_grad is None
    own = [p for p in loss.qvalue_network_params.values(True, True) if p.grad is not None]
    assert own  # the critics' own parameters are
    if not separate_losses:  # the critics hold a copy of the trunk, trained by their loss
        assert loss.qvalue_network[0][0].module.weight is not common.module.weight
        assert loss.qvalue_network[0][0].module.weight.grad is not None
