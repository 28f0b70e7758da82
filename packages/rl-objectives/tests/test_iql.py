"""IQL and discrete IQL against plain torch; gradient isolation, keys, errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as Fn
from objectives_testlib import (
    make_action_value,
    make_categorical_actor,
    make_normal_actor,
    make_qvalue,
    make_value,
    transitions,
)
from tensordict.nn import TensorDictModule

from rl_objectives import DiscreteIQLLoss, IQLLoss, SoftUpdate

# These checks build losses with target parameters and no updater (their numerics do not
# need one): TorchRL's warning about it is tested in test_target_updater_warning.py.
pytestmark = pytest.mark.filterwarnings("ignore:No target network updater:UserWarning")


def _q(qnet, obs, act, params=None):
    if params is None:
        return qnet.module(obs, act).squeeze(-1)
    flat = {k.removeprefix("module."): v for k, v in params.flatten_keys(".").items()}
    return torch.func.functional_call(qnet.module, flat, (obs, act)).squeeze(-1)


def _expectile(u, tau):
    # |tau - 1(u < 0)| u^2, written as in the paper
    return (tau - (u < 0).float()).abs() * u**2


def test_iql_matches_plain_torch_values_and_gradients():
    actor, value = make_normal_actor(), make_value()
    loss = IQLLoss(
        actor, make_qvalue(), value, temperature=3.0, expectile=0.7, loss_function="l2", gamma=0.9
    )
    with torch.no_grad():  # targets differ from the live critics
        for p in loss.target_qvalue_network_params.values(True, True):
            p.add_(0.1 * torch.randn_like(p))
    td = transitions(16)
    out = loss(td)
    q1, q2 = loss.qvalue_network
    tgt = loss.target_qvalue_network_params
    obs, act, nobs = td["observation"], td["action"], td["next", "observation"]
    r = td["next", "reward"].squeeze(-1)
    nonterm = (~td["next", "terminated"]).squeeze(-1).float()
    qmin = torch.minimum(_q(q1, obs, act, tgt["0"]), _q(q2, obs, act, tgt["1"])).detach()
    v = value.module(obs).squeeze(-1)
    ref_value = _expectile(qmin - v, 0.7).mean()
    lp = actor.get_dist(td.select("observation")).log_prob(act)
    w = torch.exp(3.0 * (qmin - v.detach())).clamp(max=100.0)
    ref_actor = -(w * lp).mean()
    y = r + 0.9 * nonterm * value.module(nobs).squeeze(-1).detach()
    p1, p2 = _q(q1, obs, act), _q(q2, obs, act)
    ref_q = ((p1 - y) ** 2 + (p2 - y) ** 2).mean()
    torch.testing.assert_close(out["loss_value"], ref_value)
    torch.testing.assert_close(out["loss_actor"], ref_actor)
    torch.testing.assert_close(out["loss_qvalue"], ref_q)
    torch.testing.assert_close(out["entropy"], -lp.detach().mean())
    torch.testing.assert_close(td["td_error"], torch.maximum((p1 - y) ** 2, (p2 - y) ** 2).detach())
    torch.testing.assert_close(td["_log_prob"], lp.detach())
    # gradients: the sum of our losses and of the reference give the same parameter gradients
    params = [*loss.actor_network.parameters(), *loss.value_network.parameters(),
              *loss.qvalue_network.parameters()]  # fmt: skip
    ours = torch.autograd.grad(out["loss_actor"] + out["loss_value"] + out["loss_qvalue"], params)
    ref = torch.autograd.grad(ref_actor + ref_value + ref_q, params)
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b)


def test_iql_gradient_isolation_and_targets():
    loss = IQLLoss(make_normal_actor(), make_qvalue(), make_value(), expectile=0.8)
    out = loss(transitions(16))
    nets = {"loss_actor": "actor_network", "loss_value": "value_network",
            "loss_qvalue": "qvalue_network"}  # fmt: skip
    for name, owner in nets.items():
        loss.zero_grad(set_to_none=True)
        out[name].backward(retain_graph=True)
        for other in nets.values():
            grads = [p.grad for p in getattr(loss, other).parameters()]
            if other == owner:
                assert all(g is not None for g in grads), (name, other)
            else:
                assert all(g is None for g in grads), (name, other)
    assert not any("target" in n for n, _ in loss.named_parameters())
    assert set(loss.target_qvalue_network_params.keys()) == {"0", "1"}
    SoftUpdate(loss, tau=0.5).step()


def test_iql_separate_losses_keeps_shared_trunk_out_of_value_loss():
    trunk = torch.nn.Linear(3, 8)
    actor = make_normal_actor()
    actor.module[0].module[0] = trunk
    value = TensorDictModule(
        torch.nn.Sequential(trunk, torch.nn.Tanh(), torch.nn.Linear(8, 1)),
        ["observation"],
        ["state_value"],
    )
    loss = IQLLoss(actor, make_qvalue(), value, separate_losses=True)
    out = loss(transitions(8))
    out["loss_value"].backward()
    assert trunk.weight.grad is None
    assert value.module[2].weight.grad is not None


@pytest.mark.parametrize("action_space", ["categorical", "one_hot"])
def test_discrete_iql_matches_plain_torch(action_space):
    actor, value = make_categorical_actor(), make_value()
    if action_space == "one_hot":
        body = actor.module[0]
        from tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential
        from torch import distributions as D

        actor = ProbabilisticTensorDictSequential(
            body,
            ProbabilisticTensorDictModule(
                ["logits"], ["action"], distribution_class=D.OneHotCategorical
            ),
        )
    qnet = make_action_value()
    qnet.out_keys = ["state_action_value"]
    qnet = TensorDictModule(qnet.module, ["observation"], ["state_action_value"])
    loss = DiscreteIQLLoss(
        actor, qnet, value, action_space=action_space, expectile=0.6, loss_function="l2", gamma=0.9
    )
    td = transitions(16, action=action_space)
    out = loss(td)
    q1, q2 = loss.qvalue_network
    tgt = loss.target_qvalue_network_params
    obs = td["observation"]
    idx = td["action"] if action_space == "categorical" else td["action"].float().argmax(-1)

    def qa(net, params=None):
        if params is None:
            q = net.module(obs)
        else:
            flat = {k.removeprefix("module."): v for k, v in params.flatten_keys(".").items()}
            q = torch.func.functional_call(net.module, flat, (obs,))
        return q.gather(-1, idx.unsqueeze(-1)).squeeze(-1)

    qmin = torch.minimum(qa(q1, tgt["0"]), qa(q2, tgt["1"])).detach()
    v = value.module(obs).squeeze(-1)
    logits = actor.module[0].module(obs)
    lp = Fn.log_softmax(logits, -1).gather(-1, idx.unsqueeze(-1)).squeeze(-1)
    y = (
        td["next", "reward"].squeeze(-1)
        + 0.9
        * (~td["next", "terminated"]).squeeze(-1).float()
        * value.module(td["next", "observation"]).squeeze(-1).detach()
    )
    torch.testing.assert_close(out["loss_value"], _expectile(qmin - v, 0.6).mean())
    torch.testing.assert_close(
        out["loss_actor"], -(torch.exp(qmin - v.detach()).clamp(max=100) * lp).mean()
    )
    torch.testing.assert_close(out["loss_qvalue"], ((qa(q1) - y) ** 2 + (qa(q2) - y) ** 2).mean())


def test_iql_set_keys_reduction_none_and_errors():
    loss = IQLLoss(make_normal_actor(), make_qvalue(), make_value(), scalar_output_mode="exclude",
                   reduction="none")  # fmt: skip
    td = transitions(8)
    out = loss(td)
    assert out.batch_size == (8,) and out["loss_actor"].shape == (8,) and "entropy" not in out
    with pytest.warns(UserWarning, match="scalar_output_mode"):
        IQLLoss(make_normal_actor(), make_qvalue(), make_value(), reduction="none")
    loss = IQLLoss(make_normal_actor(), make_qvalue(), make_value())
    loss.set_keys(priority="prio", log_prob="lp")
    td = transitions(8)
    loss(td)
    assert "prio" in td and "lp" in td
    with pytest.raises(ValueError, match="unknown key"):
        loss.set_keys(not_a_key="x")
    loss.set_keys(reward="rew")
    with pytest.raises(KeyError, match="'reward' key"):
        loss(transitions(8))
    bad_v = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["state_value"])
    with pytest.raises(ValueError, match="expected \\(8, 1\\)"):
        IQLLoss(make_normal_actor(), make_qvalue(), bad_v)(transitions(8))
    with pytest.raises(ValueError, match="expectile"):
        IQLLoss(make_normal_actor(), make_qvalue(), make_value(), expectile=1.5)
    with pytest.raises(ValueError, match="expected \\[\\*batch\\] or \\[\\*batch, 1\\]"):
        qnet = TensorDictModule(make_action_value().module, ["observation"], ["state_action_value"])
        td = transitions(8, action="one_hot")
        DiscreteIQLLoss(make_categorical_actor(), qnet, make_value(), action_space="categorical")(
            td
        )
