"""DDPG and TD3 against plain torch; gradient isolation."""

from __future__ import annotations

import pytest
import torch
from objectives_testlib import ACT, OBS, make_qvalue, transitions
from tensordict.nn import TensorDictModule

from rl_objectives import DDPGLoss, TD3Loss

# These checks build losses with target parameters and no updater (their numerics do not
# need one): TorchRL's warning about it is tested in test_target_updater_warning.py.
pytestmark = pytest.mark.filterwarnings("ignore:No target network updater:UserWarning")


def _actor():
    return TensorDictModule(
        torch.nn.Sequential(torch.nn.Linear(OBS, ACT), torch.nn.Tanh()), ["observation"], ["action"]
    )


def _call(module, params, *args):
    flat = {k.removeprefix("module."): v for k, v in params.flatten_keys(".").items()}
    return torch.func.functional_call(module.module, flat, args)


def test_ddpg_matches_plain_torch_and_isolates_gradients():
    actor, critic = _actor(), make_qvalue()
    loss = DDPGLoss(actor, critic, gamma=0.9, delay_actor=True)
    td = transitions(16)
    out = loss(td)
    obs, nobs = td["observation"], td["next", "observation"]
    with torch.no_grad():
        na = _call(actor, loss.target_actor_network_params, nobs)
        nq = _call(critic, loss.target_value_network_params, nobs, na).squeeze(-1)
        y = (
            td["next", "reward"].squeeze(-1)
            + 0.9 * (~td["next", "terminated"]).squeeze(-1).float() * nq
        )
    pred = critic.module(obs, td["action"]).squeeze(-1)
    torch.testing.assert_close(out["loss_value"], ((pred - y) ** 2).mean())
    torch.testing.assert_close(out["loss_actor"], -critic.module(obs, actor.module(obs)).mean())
    # per-sample diagnostics, as TorchRL's DDPGLoss returns them
    torch.testing.assert_close(out["pred_value"], pred.detach())
    torch.testing.assert_close(out["target_value"], y)
    torch.testing.assert_close(out["td_error"], (pred.detach() - y) ** 2)
    torch.testing.assert_close(out["pred_value_max"], pred.detach().max())
    out["loss_actor"].backward()
    assert all(p.grad is None for p in critic.parameters())
    assert all(p.grad is not None for p in actor.parameters())


def test_td3_matches_plain_torch():
    actor = _actor()
    loss = TD3Loss(actor, make_qvalue(), bounds=(-1.0, 1.0), gamma=0.9, loss_function="l2")
    td = transitions(16)
    torch.manual_seed(5)
    out = loss(td)
    q1, q2 = loss.qvalue_network
    tq = loss.target_qvalue_network_params
    obs, nobs = td["observation"], td["next", "observation"]
    torch.manual_seed(5)
    with torch.no_grad():
        na = _call(actor, loss.target_actor_network_params, nobs)
        na = (na + (torch.randn_like(na) * 0.2).clamp(-0.5, 0.5)).clamp(-1, 1)
        nq = torch.minimum(_call(q1, tq["0"], nobs, na), _call(q2, tq["1"], nobs, na)).squeeze(-1)
        y = (
            td["next", "reward"].squeeze(-1)
            + 0.9 * (~td["next", "terminated"]).squeeze(-1).float() * nq
        )
    a = td["action"]
    lq = (
        (q1.module(obs, a).squeeze(-1) - y) ** 2 + (q2.module(obs, a).squeeze(-1) - y) ** 2
    ).mean()
    torch.testing.assert_close(out["loss_qvalue"], lq)
    torch.testing.assert_close(out["loss_actor"], -q1.module(obs, actor.module(obs)).mean())
    out["loss_actor"].backward()
    assert all(p.grad is None for p in loss.qvalue_network.parameters())
