"""CQL and discrete CQL against plain torch (values and gradients); keys, options, errors."""

from __future__ import annotations

import math

import pytest
import torch
from objectives_testlib import make_action_value, make_qvalue, make_tanh_actor, transitions

from rl_objectives import CQLLoss, DiscreteCQLLoss

# These checks build losses with target parameters and no updater (their numerics do not
# need one): TorchRL's warning about it is tested in test_target_updater_warning.py.
pytestmark = pytest.mark.filterwarnings("ignore:No target network updater:UserWarning")


def _q(qnet, obs, act, params=None):
    if params is None:
        return qnet.module(obs, act).squeeze(-1)
    flat = {k.removeprefix("module."): v for k, v in params.flatten_keys(".").items()}
    return torch.func.functional_call(qnet.module, flat, (obs, act)).squeeze(-1)


def _dist(actor, obs):
    loc, scale = actor.module[0].module(obs)
    return actor.module[1].distribution_class(loc, scale)


def _cql_reference(loss, actor, td, *, n, temp, w, alpha, deterministic_backup=True):
    """Every CQL loss in plain torch, drawing the random numbers in the loss's order."""
    q1, q2 = loss.qvalue_network
    tgt = loss.target_qvalue_network_params
    obs, act, nobs = td["observation"], td["action"], td["next", "observation"]
    b, d = act.shape
    r = td["next", "reward"].squeeze(-1)
    nonterm = (~td["next", "terminated"]).squeeze(-1).float()
    with torch.no_grad():
        nd = _dist(actor, nobs)
        na = nd.rsample()
        nv = torch.minimum(_q(q1, nobs, na, tgt["0"]), _q(q2, nobs, na, tgt["1"]))
        if not deterministic_backup:
            nv = nv - alpha * nd.log_prob(na)
        y = r + 0.9 * nonterm * nv
    p1, p2 = _q(q1, obs, act), _q(q2, obs, act)
    loss_q = ((p1 - y) ** 2 + (p2 - y) ** 2).mean()
    with torch.no_grad():
        both = torch.cat([obs.repeat_interleave(n, 0), nobs.repeat_interleave(n, 0)])
        pd = _dist(actor, both)
        pa = pd.rsample()
        plp = pd.log_prob(pa)
    rand = torch.empty(b * n, d).uniform_(-1, 1)
    cql = []
    for qn in (q1, q2):
        o = obs.repeat_interleave(n, 0)
        rows = []
        for i in range(b):  # per state: 3n log-density corrected scores
            sl = slice(i * n, (i + 1) * n)
            curr, new = slice(i * n, (i + 1) * n), slice(b * n + i * n, b * n + (i + 1) * n)
            scores = torch.cat(
                [
                    _q(qn, o[sl], rand[sl]) - d * math.log(0.5),
                    _q(qn, o[sl], pa[curr]) - plp[curr],
                    _q(qn, o[sl], pa[new]) - plp[new],
                ]
            )
            rows.append(temp * torch.logsumexp(scores / temp, 0))
        cql.append(w * (torch.stack(rows) - _q(qn, obs, act)))
    loss_cql = (cql[0] + cql[1]).mean()
    dist = _dist(actor, obs)
    a_new = dist.rsample()
    lp = dist.log_prob(a_new)
    qd = {k.removeprefix("module."): v.detach() for k, v in q1.state_dict().items()}
    qd2 = {k.removeprefix("module."): v.detach() for k, v in q2.state_dict().items()}
    qn_min = torch.minimum(
        torch.func.functional_call(q1.module, qd, (obs, a_new)).squeeze(-1),
        torch.func.functional_call(q2.module, qd2, (obs, a_new)).squeeze(-1),
    )
    return {
        "loss_qvalue": loss_q,
        "loss_cql": loss_cql,
        "loss_actor": (alpha * lp - qn_min).mean(),
        "loss_actor_bc": (alpha * lp - dist.log_prob(act)).mean(),
        "loss_alpha": (-loss.log_alpha * (lp.detach() - 2.0)).mean(),
        "cql": cql,
    }


@pytest.mark.parametrize("deterministic_backup", [True, False])
def test_cql_matches_plain_torch_values_and_gradients(deterministic_backup):
    actor = make_tanh_actor()
    loss = CQLLoss(
        actor,
        make_qvalue(),
        gamma=0.9,
        alpha_init=0.5,
        loss_function="l2",
        num_random=3,
        temperature=2.0,
        min_q_weight=5.0,
        deterministic_backup=deterministic_backup,
    )
    with torch.no_grad():
        for p in loss.target_qvalue_network_params.values(True, True):
            p.add_(0.1 * torch.randn_like(p))
    td = transitions(6)
    torch.manual_seed(7)
    out = loss(td)
    torch.manual_seed(7)
    ref = _cql_reference(
        loss, actor, td, n=3, temp=2.0, w=5.0, alpha=0.5, deterministic_backup=deterministic_backup
    )
    for k in ("loss_qvalue", "loss_cql", "loss_actor", "loss_actor_bc", "loss_alpha"):
        torch.testing.assert_close(out[k], ref[k], msg=k)
    torch.testing.assert_close(td["cql_q1_loss"], ref["cql"][0].detach())
    assert td["pred_q1"].shape == (6, 1) and td["td_error"].shape == (6,)
    params = [*loss.actor_network.parameters(), *loss.qvalue_network.parameters()]
    names = ("loss_qvalue", "loss_cql", "loss_actor", "loss_actor_bc")
    ours = torch.autograd.grad(sum(out[k] for k in names), params, allow_unused=True)
    theirs = torch.autograd.grad(sum(ref[k] for k in names), params, allow_unused=True)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b)


def test_cql_gradient_isolation():
    loss = CQLLoss(make_tanh_actor(), make_qvalue(), target_entropy=-2.0, num_random=2)
    out = loss(transitions(8))
    for name, trains_actor, trains_q in [
        ("loss_actor", True, False),
        ("loss_actor_bc", True, False),
        ("loss_qvalue", False, True),
        ("loss_cql", False, True),
    ]:
        loss.zero_grad(set_to_none=True)
        out[name].backward(retain_graph=True)
        assert all((p.grad is not None) == trains_actor for p in loss.actor_network.parameters())
        assert all((p.grad is not None) == trains_q for p in loss.qvalue_network.parameters())
        assert loss.log_alpha.grad is None


def test_cql_max_q_backup_and_lagrange():
    actor = make_tanh_actor()
    loss = CQLLoss(actor, make_qvalue(), max_q_backup=True, with_lagrange=True, num_random=4,
                   lagrange_thresh=1.0, gamma=0.9, loss_function="l2")  # fmt: skip
    td = transitions(5)
    torch.manual_seed(0)
    out = loss(td)
    assert "loss_alpha_prime" in out and "loss_alpha_prime" in loss.out_keys
    # the max-backup target: max over 4 sampled next actions, min over target critics
    q1, q2 = loss.qvalue_network
    tgt = loss.target_qvalue_network_params
    torch.manual_seed(0)
    with torch.no_grad():
        nobs = td["next", "observation"].repeat_interleave(4, 0)
        na = _dist(actor, nobs).rsample()
        q = torch.stack([_q(q1, nobs, na, tgt["0"]), _q(q2, nobs, na, tgt["1"])]).view(2, 5, 4)
        nv = q.amax(-1).amin(0)
    y = td["next", "reward"].squeeze(-1) + 0.9 * (~td["next", "terminated"]).squeeze(-1) * nv
    pred = torch.stack(
        [_q(q1, td["observation"], td["action"]), _q(q2, td["observation"], td["action"])]
    )
    torch.testing.assert_close(out["loss_qvalue"], ((pred - y) ** 2).sum(0).mean())
    # alpha' moves with the detached conservative gap only
    gap = torch.stack([td["cql_q1_loss"].mean(), td["cql_q2_loss"].mean()]) - 1.0
    torch.testing.assert_close(out["loss_alpha_prime"], -0.5 * gap.sum())
    out["loss_alpha_prime"].backward()
    assert loss.log_alpha_prime.grad is not None
    assert all(p.grad is None for p in loss.qvalue_network.parameters())


def test_cql_errors_and_keys():
    loss = CQLLoss(make_tanh_actor(), make_qvalue(), num_random=2)
    loss.set_keys(pred_q1="p1", cql_q2_loss="c2")
    td = transitions(4)
    loss(td)
    assert "p1" in td and "c2" in td
    td = transitions(4)
    td["action"] = td["action"][:, 0]
    with pytest.raises(ValueError, match="expected \\[\\*batch, action_dim\\]"):
        loss(td)
    with pytest.raises(ValueError, match="max_alpha"):
        CQLLoss(make_tanh_actor(), make_qvalue(), max_alpha=0)
    with pytest.raises(TypeError, match="get_dist"):
        CQLLoss(make_qvalue(), make_qvalue())


@pytest.mark.parametrize("action", ["categorical", "one_hot"])
def test_discrete_cql_matches_plain_torch(action):
    net = make_action_value()
    loss = DiscreteCQLLoss(net, action_space=action, gamma=0.9)
    with torch.no_grad():
        for p in loss.target_value_network_params.values(True, True):
            p.add_(0.1)
    td = transitions(16, action=action)
    out = loss(td)
    obs = td["observation"]
    idx = td["action"] if action == "categorical" else td["action"].float().argmax(-1)
    q = net.module(obs)
    qa = q.gather(-1, idx.unsqueeze(-1)).squeeze(-1)
    flat = {
        k.removeprefix("module."): v
        for k, v in loss.target_value_network_params.flatten_keys(".").items()
    }
    qn = torch.func.functional_call(net.module, flat, (td["next", "observation"],)).amax(-1)
    y = td["next", "reward"].squeeze(-1) + 0.9 * (~td["next", "terminated"]).squeeze(-1) * qn
    ref_q = (0.5 * (qa - y) ** 2).mean()
    ref_cql = (torch.logsumexp(q, -1) - qa).mean()
    torch.testing.assert_close(out["loss_qvalue"], ref_q)
    torch.testing.assert_close(out["loss_cql"], ref_cql)
    ours = torch.autograd.grad(out["loss_qvalue"] + out["loss_cql"], list(net.parameters()))
    theirs = torch.autograd.grad(ref_q + ref_cql, list(net.parameters()))
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(td["td_error"], ((qa - y) ** 2).detach())
    assert td["pred_val"].shape == (16, 4)


def test_discrete_cql_errors():
    with pytest.warns(UserWarning, match="one_hot"):
        DiscreteCQLLoss(make_action_value())
    with pytest.raises(ValueError, match="unsupported action_space"):
        DiscreteCQLLoss(make_action_value(), action_space="box")
