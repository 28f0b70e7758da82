"""SAC and discrete SAC against plain torch; gradient isolation."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as Fn
from objectives_testlib import (
    make_action_value,
    make_categorical_actor,
    make_qvalue,
    make_tanh_actor,
    transitions,
)

from rl_objectives import DiscreteSACLoss, SACLoss, SoftUpdate

# These checks build losses with target parameters and no updater (their numerics do not
# need one): TorchRL's warning about it is tested in test_target_updater_warning.py.
pytestmark = pytest.mark.filterwarnings("ignore:No target network updater:UserWarning")


def _q(qnet, obs, act, params=None):
    if params is None:
        return qnet.module(obs, act).squeeze(-1)
    flat = {k.removeprefix("module."): v for k, v in params.flatten_keys(".").items()}
    return torch.func.functional_call(qnet.module, flat, (obs, act)).squeeze(-1)


def _sac_reference(loss, actor, td, out):
    """Check the critic loss and ``td_error`` of ``out``, computed after ``manual_seed(3)``."""
    q1, q2 = loss.qvalue_network
    tgt = loss.target_qvalue_network_params
    torch.manual_seed(3)
    obs, nobs = td["observation"], td["next", "observation"]
    with torch.no_grad():
        nd = actor.get_dist(td["next"].select("observation"))
        na = nd.rsample()
        nlp = nd.log_prob(na)
        nq = torch.minimum(_q(q1, nobs, na, tgt["0"]), _q(q2, nobs, na, tgt["1"]))
        y = td["next", "reward"].squeeze(-1) + 0.9 * (~td["next", "terminated"]).squeeze(
            -1
        ).float() * (nq - 0.5 * nlp)
    lq = ((_q(q1, obs, td["action"]) - y) ** 2 + (_q(q2, obs, td["action"]) - y) ** 2).mean()
    td_error = torch.maximum(
        (_q(q1, obs, td["action"]) - y).abs(), (_q(q2, obs, td["action"]) - y).abs()
    )
    torch.testing.assert_close(out["loss_qvalue"], lq)
    torch.testing.assert_close(td["td_error"], td_error.detach())


def test_sac_follows_in_place_target_updates_and_dtype_moves():
    """The target / detached parameters bound once for the swaps stay the live ones."""
    actor = make_tanh_actor()
    loss = SACLoss(actor, make_qvalue(), gamma=0.9, alpha_init=0.5, loss_function="l2")
    loss(transitions(16))  # binds the parameters
    with torch.no_grad():
        for p in loss.qvalue_network.parameters():
            p.add_(0.5)
    SoftUpdate(loss, tau=0.5).step()
    td = transitions(16, seed=1)
    torch.manual_seed(3)
    _sac_reference(loss, actor, td, loss(td))
    loss = loss.double()
    td = transitions(16, seed=2).apply(lambda x: x.double() if x.is_floating_point() else x)
    out = loss(td)
    assert out["loss_qvalue"].dtype == torch.float64
    out["loss_actor"].backward()
    assert all(p.grad is None for p in loss.qvalue_network.parameters())
    assert all(p.grad is not None for p in loss.actor_network.parameters())


def test_sac_matches_plain_torch():
    actor = make_tanh_actor()
    loss = SACLoss(actor, make_qvalue(), gamma=0.9, alpha_init=0.5, loss_function="l2")
    assert loss.target_entropy is None  # "auto" without spec: inferred from the data
    td = transitions(16)
    torch.manual_seed(3)
    out = loss(td)
    assert loss.target_entropy == -2.0
    _sac_reference(loss, actor, td, out)  # seeds 3 and draws a', as the loss did first
    q1, q2 = loss.qvalue_network
    obs = td["observation"]
    d = actor.get_dist(td.select("observation"))
    a = d.rsample()
    lp = d.log_prob(a)
    qa = torch.minimum(_q(q1, obs, a), _q(q2, obs, a))
    torch.testing.assert_close(out["loss_actor"], (0.5 * lp - qa).mean())
    torch.testing.assert_close(out["loss_alpha"], (-loss.log_alpha * (lp.detach() - 2.0)).mean())
    torch.testing.assert_close(out["alpha"], torch.tensor(0.5))
    assert td["td_error"].shape == (16,)


def _grads(module):
    return [p.grad for p in module.parameters()]


def test_sac_gradient_isolation():
    loss = SACLoss(make_tanh_actor(), make_qvalue(), gamma=0.9, target_entropy=-2.0)
    out = loss(transitions(16))
    out["loss_actor"].backward(retain_graph=True)
    assert all(g is None for g in _grads(loss.qvalue_network))
    assert all(g is not None for g in _grads(loss.actor_network))
    assert loss.log_alpha.grad is None
    loss.zero_grad(set_to_none=True)
    out["loss_alpha"].backward(retain_graph=True)
    assert loss.log_alpha.grad is not None
    assert all(g is None for g in _grads(loss.qvalue_network)) and all(
        g is None for g in _grads(loss.actor_network)
    )
    loss.zero_grad(set_to_none=True)
    out["loss_qvalue"].backward()
    assert all(g is None for g in _grads(loss.actor_network))
    assert all(g is not None for g in _grads(loss.qvalue_network))
    assert all(p.grad is None for p in loss.target_qvalue_network_params.values(True, True))
    names = [n for n, _ in loss.named_parameters()]
    assert "temperature.log_alpha" in names and not any("target" in n for n in names)


def test_sac_copies_are_reinitialised_and_fixed_alpha():
    loss = SACLoss(make_tanh_actor(), make_qvalue(), fixed_alpha=True, target_entropy=-2.0)
    w0, w1 = (net.module.net[0].weight for net in loss.qvalue_network)
    assert not torch.equal(w0, w1)
    assert "temperature.log_alpha" not in dict(loss.named_parameters())


def test_discrete_sac_matches_plain_torch():
    actor = make_categorical_actor()
    loss = DiscreteSACLoss(
        actor,
        make_action_value(),
        action_space="categorical",
        num_actions=4,
        gamma=0.9,
        loss_function="l2",
    )
    td = transitions(16, action="categorical")
    out = loss(td)
    q1, q2 = loss.qvalue_network
    tgt = loss.target_qvalue_network_params

    def qf(net, obs, params=None):
        if params is None:
            return net.module(obs)
        flat = {k.removeprefix("module."): v for k, v in params.flatten_keys(".").items()}
        return torch.func.functional_call(net.module, flat, (obs,))

    obs, nobs = td["observation"], td["next", "observation"]
    with torch.no_grad():
        np_ = Fn.softmax(actor.module[0].module(nobs), -1)
        nq = torch.minimum(qf(q1, nobs, tgt["0"]), qf(q2, nobs, tgt["1"]))
        nv = (np_ * (nq - np_.log())).sum(-1)
        y = (
            td["next", "reward"].squeeze(-1)
            + 0.9 * (~td["next", "terminated"]).squeeze(-1).float() * nv
        )
    a = td["action"].unsqueeze(-1)
    lq = (
        (qf(q1, obs).gather(-1, a).squeeze(-1) - y) ** 2
        + (qf(q2, obs).gather(-1, a).squeeze(-1) - y) ** 2
    ).mean()
    p = Fn.softmax(actor.module[0].module(obs), -1)
    minq = torch.minimum(qf(q1, obs), qf(q2, obs))
    torch.testing.assert_close(out["loss_qvalue"], lq)
    torch.testing.assert_close(out["loss_actor"], (p * (p.log() - minq)).sum(-1).mean())
    te = 0.98 * torch.log(torch.tensor(4.0))
    torch.testing.assert_close(
        out["loss_alpha"], (-loss.log_alpha * ((p * p.log()).sum(-1).detach() + te)).mean()
    )


def _v(vnet, obs, params=None):
    if params is None:
        return vnet.module(obs).squeeze(-1)
    flat = {k.removeprefix("module."): v for k, v in params.flatten_keys(".").items()}
    return torch.func.functional_call(vnet.module, flat, (obs,)).squeeze(-1)


def test_sac_v1_with_a_value_network_against_plain_torch():
    from objectives_testlib import make_value

    torch.manual_seed(0)
    actor, vnet = make_tanh_actor(), make_value()
    loss = SACLoss(actor, make_qvalue(), vnet, gamma=0.9, alpha_init=0.5, loss_function="l2")
    assert loss.out_keys[-1] == "loss_value" and loss.target_value_network_params is not None
    td = transitions(16)
    torch.manual_seed(3)
    out = loss(td)
    q1, q2 = loss.qvalue_network
    tq = loss.target_qvalue_network_params
    obs, act = td["observation"], td["action"]
    with torch.no_grad():
        y = td["next", "reward"].squeeze(-1) + 0.9 * (~td["next", "terminated"]).squeeze(
            -1
        ).float() * _v(vnet, td["next", "observation"], loss.target_value_network_params)
    # critic 1 regresses the first half of the batch, critic 2 the second half
    pred = torch.cat([_q(q1, obs[:8], act[:8]), _q(q2, obs[8:], act[8:])])
    torch.testing.assert_close(out["loss_qvalue"], ((pred - y) ** 2).mean())
    torch.testing.assert_close(td["td_error"], (pred.detach() - y) ** 2)
    torch.manual_seed(3)
    with torch.no_grad():
        d = actor.get_dist(td.select("observation"))
        a = d.rsample()
        v_target = torch.minimum(
            _q(q1, obs, a, tq["0"]), _q(q2, obs, a, tq["1"])
        ) - 0.5 * d.log_prob(a)
    torch.testing.assert_close(out["loss_value"], ((_v(vnet, obs) - v_target) ** 2).mean())
    out["loss_value"].backward()
    assert all(p.grad is not None for p in vnet.parameters())
    assert all(p.grad is None for p in actor.parameters())
    with pytest.raises(RuntimeError, match="split evenly"):
        loss(transitions(15))
    no_delay = SACLoss(actor, make_qvalue(), make_value(), delay_value=False)
    # without delayed targets, TorchRL's target view is the detached live parameters
    assert "target_value_network_params" not in dict(no_delay.named_children())
    view = no_delay.target_value_network_params.flatten_keys()
    live = no_delay.value_network_params.flatten_keys()
    for key, value in view.items():
        assert not value.requires_grad and torch.equal(value, live[key])


def _composite_actor():
    from objectives_testlib import OBS, TanhNormal
    from tensordict.nn import (
        CompositeDistribution,
        NormalParamExtractor,
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
        TensorDictModule,
    )

    net = torch.nn.Sequential(torch.nn.Linear(OBS, 4), NormalParamExtractor())
    params = [("params", "action1", "loc"), ("params", "action1", "scale")]
    return ProbabilisticTensorDictSequential(
        TensorDictModule(net, ["observation"], params),
        ProbabilisticTensorDictModule(
            ["params"],
            ["action"],
            distribution_class=CompositeDistribution,
            distribution_kwargs={"distribution_map": {"action1": TanhNormal}},
        ),
    )


def test_sac_with_a_composite_action_distribution_sums_the_heads_log_probs():
    from objectives_testlib import QNet
    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule

    class ActionTDQ(QNet):  # the critic reads the composite action's "action1" entry
        def forward(self, obs, act):
            return super().forward(obs, act.get("action1") if isinstance(act, TensorDict) else act)

    actor = _composite_actor()
    q = TensorDictModule(ActionTDQ(), ["observation", "action"], ["state_action_value"])
    loss = SACLoss(actor, q, target_entropy=-2.0, delay_qvalue=False)
    td = transitions(8)
    td["action"] = TensorDict(action1=td["action"], batch_size=[8])
    torch.manual_seed(0)
    out = loss(td)
    # the entropy entry is minus the mean summed log-prob of a fresh sample: recompute it
    torch.manual_seed(0)
    actor.get_dist(td["next"].select("observation")).rsample()  # the next-step draw comes first
    d = actor.get_dist(td.select("observation"))
    lp = d.log_prob(d.rsample())
    expected = -sum(v for v in lp.values(True, True)).mean()
    torch.testing.assert_close(out["entropy"], expected)


def test_sac_target_entropy_is_a_tensor_read_from_the_actor_spec_and_scalar_output_mode():
    class Leaf:
        shape = torch.Size([3])

    class Spec(dict):
        shape = torch.Size([])

        def keys(self, include_nested=False, leaves_only=False):
            return list(super().keys())

    actor = make_tanh_actor()
    actor.spec = Spec(action=Leaf())  # as a TorchRL ProbabilisticActor's Composite spec
    loss = SACLoss(actor, make_qvalue())
    assert isinstance(loss.target_entropy, torch.Tensor) and loss.target_entropy.item() == -3.0
    assert (
        SACLoss(make_tanh_actor(), make_qvalue(), target_entropy=-1.5).target_entropy.item() == -1.5
    )
    loss = SACLoss(make_tanh_actor(), make_qvalue(), reduction="none", scalar_output_mode="exclude")
    out = loss(transitions(8))
    assert out.batch_size == (8,) and "alpha" not in out
    with pytest.warns(UserWarning, match="left out"):
        SACLoss(make_tanh_actor(), make_qvalue(), reduction="none")
    n = 4
    dsac = DiscreteSACLoss(
        make_categorical_actor(), make_action_value(), num_actions=n, action_space="categorical"
    )
    assert dsac.delay_actor is False
    torch.testing.assert_close(dsac.target_entropy, torch.tensor(0.98 * math.log(n)))


def test_discrete_sac_skip_done_states_ignores_invalid_done_observations():
    def build(skip):
        torch.manual_seed(0)
        return DiscreteSACLoss(
            make_categorical_actor(),
            make_action_value(),
            num_actions=4,
            action_space="categorical",
            skip_done_states=skip,
            delay_qvalue=False,
        )

    td = transitions(16, action="categorical")
    done = td["next", "done"].squeeze(-1)
    assert done.any() and not done.all()
    td_nan = td.clone()
    td_nan["next", "observation"][done] = float("nan")
    out = build(True)(td_nan)
    assert all(out[k].isfinite() for k in ("loss_actor", "loss_qvalue", "loss_alpha"))
    # the same as computing every next state and bootstrapping done steps on 0
    reference = td.clone()
    reference["next", "terminated"] = td["next", "done"]
    torch.testing.assert_close(out["loss_qvalue"], build(False)(reference)["loss_qvalue"])
