"""TD3+BC against plain torch (values and gradients); bounds, keys, errors."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from objectives_testlib import ACT, OBS, make_qvalue, transitions
from tensordict.nn import TensorDictModule

from rl_objectives import TD3BCLoss

# These checks build losses with target parameters and no updater (their numerics do not
# need one): TorchRL's warning about it is tested in test_target_updater_warning.py.
pytestmark = pytest.mark.filterwarnings("ignore:No target network updater:UserWarning")


def _actor():
    return TensorDictModule(
        torch.nn.Sequential(torch.nn.Linear(OBS, 8), torch.nn.Tanh(), torch.nn.Linear(8, ACT),
                            torch.nn.Tanh()),
        ["observation"], ["action"],
    )  # fmt: skip


def _fc(module, params, *args):
    flat = {k.removeprefix("module."): v for k, v in params.flatten_keys(".").items()}
    return torch.func.functional_call(module, flat, args)


def test_td3_bc_matches_plain_torch_values_and_gradients():
    actor = _actor()
    loss = TD3BCLoss(actor, make_qvalue(), bounds=(-0.8, 0.8), gamma=0.9, loss_function="l2",
                     alpha=2.5, policy_noise=0.3, noise_clip=0.4)  # fmt: skip
    with torch.no_grad():
        for p in loss.target_qvalue_network_params.values(True, True):
            p.add_(0.1 * torch.randn_like(p))
        for p in loss.target_actor_network_params.values(True, True):
            p.add_(0.1 * torch.randn_like(p))
    td = transitions(16)
    torch.manual_seed(1)
    out = loss(td)
    torch.manual_seed(1)
    q1, q2 = loss.qvalue_network
    tq, ta = loss.target_qvalue_network_params, loss.target_actor_network_params
    obs, act, nobs = td["observation"], td["action"], td["next", "observation"]
    pi = actor.module(obs)
    q_pi = torch.func.functional_call(
        q1.module, {k: v.detach() for k, v in q1.module.named_parameters()}, (obs, pi)
    ).squeeze(-1)
    lmbd = 2.5 / q_pi.abs().mean().detach()
    ref_actor = (-lmbd * q_pi).mean() + ((pi - act) ** 2).mean()
    noise = (torch.randn_like(act) * 0.3).clamp(-0.4, 0.4)
    with torch.no_grad():
        na = (_fc(actor.module, ta, nobs) + noise).clamp(-0.8, 0.8)
        nq = torch.minimum(_fc(q1.module, tq["0"], nobs, na), _fc(q2.module, tq["1"], nobs, na))
        y = td["next", "reward"] + 0.9 * (~td["next", "terminated"]) * nq
    y = y.squeeze(-1)
    p1, p2 = q1.module(obs, act).squeeze(-1), q2.module(obs, act).squeeze(-1)
    ref_q = ((p1 - y) ** 2 + (p2 - y) ** 2).mean()
    torch.testing.assert_close(out["loss_actor"], ref_actor)
    torch.testing.assert_close(out["loss_qvalue"], ref_q)
    torch.testing.assert_close(out["lmbd"], lmbd)
    torch.testing.assert_close(out["bc_loss"], ((pi - act) ** 2).mean().detach())
    torch.testing.assert_close(td["td_error"], torch.maximum((p1 - y) ** 2, (p2 - y) ** 2).detach())
    params = [*loss.actor_network.parameters(), *loss.qvalue_network.parameters()]
    ours = torch.autograd.grad(out["loss_actor"] + out["loss_qvalue"], params)
    theirs = torch.autograd.grad(ref_actor + ref_q, params)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b)


def test_td3_bc_gradient_isolation_and_spec_bounds():
    spec = SimpleNamespace(space=SimpleNamespace(low=-torch.ones(ACT), high=torch.ones(ACT)))
    loss = TD3BCLoss(_actor(), make_qvalue(), action_spec=spec)
    torch.testing.assert_close(loss.max_action, torch.ones(ACT))
    out = loss(transitions(8))
    out["loss_actor"].backward(retain_graph=True)
    assert all(p.grad is None for p in loss.qvalue_network.parameters())
    assert all(p.grad is not None for p in loss.actor_network.parameters())
    loss.zero_grad(set_to_none=True)
    out["loss_qvalue"].backward()
    assert all(p.grad is None for p in loss.actor_network.parameters())
    assert all(p.grad is not None for p in loss.qvalue_network.parameters())


def test_td3_bc_errors_and_keys():
    with pytest.raises(ValueError, match="exactly one of action_spec and bounds"):
        TD3BCLoss(_actor(), make_qvalue())
    with pytest.raises(ValueError, match="exactly one"):
        TD3BCLoss(_actor(), make_qvalue(), bounds=(-1, 1), action_spec=object())
    with pytest.raises(ValueError, match="low bound higher"):
        TD3BCLoss(_actor(), make_qvalue(), bounds=(1.0, -1.0))
    with pytest.raises(ValueError, match="not of type Bounded"):
        TD3BCLoss(_actor(), make_qvalue(), action_spec=object())
    loss = TD3BCLoss(_actor(), make_qvalue(), bounds=(-1.0, 1.0))
    loss.set_keys(priority="prio")
    td = transitions(8)
    loss(td)
    assert "prio" in td
    td = transitions(8)
    td["action"] = td["action"][:, :1]
    with pytest.raises(ValueError, match="they must match"):
        loss(td)
