"""The drop-in modules: keys, critic calls and options around the scans."""

from __future__ import annotations

import kernels_scan_reference as ref
import pytest
import torch
from kernels_test_backends import BACKENDS
from tensordict import TensorDict
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)

from rl_kernels import GAE, TDLambdaEstimator, VTrace


def _batch(batch=(3,), steps=7, seed=0):
    gen = torch.Generator().manual_seed(seed)
    shape = (*batch, steps)
    done = torch.rand((*shape, 1), generator=gen) < 0.3
    done[..., 0, :] = True
    terminated = done & (torch.rand((*shape, 1), generator=gen) < 0.5)
    return TensorDict(
        {
            "observation": torch.randn((*shape, 4), generator=gen),
            "action": torch.randint(2, shape, generator=gen),
            "action_log_prob": torch.randn((*shape, 1), generator=gen) * 0.1 - 0.7,
            ("next", "observation"): torch.randn((*shape, 4), generator=gen),
            ("next", "reward"): torch.randn((*shape, 1), generator=gen),
            ("next", "done"): done,
            ("next", "terminated"): terminated,
        },
        batch_size=shape,
    )


def _critic():
    torch.manual_seed(0)
    return TensorDictModule(torch.nn.Linear(4, 1), ["observation"], ["state_value"])


def _values(td, critic):
    with torch.no_grad():
        return critic(td.clone())["state_value"], critic(td["next"].clone())["state_value"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_gae_module_matches_reference(batch, backend):
    td = _batch(batch if batch else (), 6)
    critic = _critic()
    v, nv = _values(td, critic)
    GAE(gamma=0.9, lmbda=0.8, value_network=critic, backend=backend)(td)
    nxt = td["next"]
    adv, target = ref.gae(0.9, 0.8, v, nv, nxt["reward"], nxt["done"], nxt["terminated"])
    torch.testing.assert_close(td["advantage"], adv)
    torch.testing.assert_close(td["value_target"], target)
    torch.testing.assert_close(td["state_value"], v)
    torch.testing.assert_close(td["next", "state_value"], nv)


def test_gae_shifted_equals_full_and_average():
    td = _batch()
    # consistent trajectories: inside an episode the next observation is the following root one
    obs, nxt, done = td["observation"], td["next", "observation"], td["next", "done"]
    nxt[:, :-1] = torch.where(done[:, :-1], nxt[:, :-1], obs[:, 1:])
    critic = _critic()
    full = GAE(gamma=0.9, lmbda=0.8, value_network=critic)(td.clone())
    shifted = GAE(gamma=0.9, lmbda=0.8, value_network=critic, shifted=True)(td.clone())
    torch.testing.assert_close(full["advantage"], shifted["advantage"])
    avg = GAE(gamma=0.9, lmbda=0.8, value_network=critic, average_gae=True)(td.clone())
    a = full["advantage"]
    torch.testing.assert_close(avg["advantage"], (a - a.mean()) / a.std())


def test_differentiable_keeps_the_graph():
    td = _batch()
    critic = _critic()
    out = GAE(gamma=0.9, lmbda=0.8, value_network=critic)(td.clone())
    assert not out["value_target"].requires_grad
    data = td.clone()
    obs = data["observation"].requires_grad_()
    out = GAE(gamma=0.9, lmbda=0.8, value_network=critic, differentiable=True)(data)
    out["value_target"].sum().backward()
    # the graph runs through the critic to its inputs; its parameters are held out (TorchRL)
    assert obs.grad is not None and obs.grad.abs().sum() > 0
    assert critic.module.weight.grad is None


def test_differentiable_vtrace_holds_the_actor_out():
    td = _batch()
    critic = _critic()
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(torch.nn.Linear(4, 2), ["observation"], ["logits"]),
        ProbabilisticTensorDictModule(
            ["logits"], ["action"], distribution_class=torch.distributions.Categorical
        ),
    )
    with torch.no_grad():  # behaviour log-probs above the learner's: rho < 1, not clipped
        td["action_log_prob"] = actor.get_dist(td).log_prob(td["action"]).unsqueeze(-1) + 1.0
    obs = td["observation"].requires_grad_()
    out = VTrace(gamma=0.9, actor_network=actor, value_network=critic, differentiable=True)(td)
    out["advantage"].sum().backward()
    # gradients reach the data through the actor and the critic, never their weights (TorchRL)
    assert obs.grad is not None and obs.grad.abs().sum() > 0
    assert actor.module[0].module.weight.grad is None
    assert critic.module.weight.grad is None


def test_values_from_data_and_set_keys():
    td = _batch()
    critic = _critic()
    v, nv = _values(td, critic)
    td.set("v", v)
    td.set(("next", "v"), nv)
    td.set(("next", "r"), td["next", "reward"])
    est = TDLambdaEstimator(gamma=0.9, lmbda=0.7).set_keys(
        value="v", reward="r", advantage="adv", value_target="ret"
    )
    est(td)
    nxt = td["next"]
    expected = ref.td_lambda(0.9, 0.7, nv, nxt["reward"], nxt["done"], nxt["terminated"])
    torch.testing.assert_close(td["ret"], expected)
    torch.testing.assert_close(td["adv"], expected - v)
    torch.testing.assert_close(est.value_estimate(td), expected)


def test_missing_key_names_set_keys():
    td = _batch()
    with pytest.raises(KeyError, match=r"'state_value'.*set_keys\(value="):
        GAE(gamma=0.9, lmbda=0.8)(td)
    with pytest.raises(ValueError, match="unknown key name"):
        GAE(gamma=0.9, lmbda=0.8).set_keys(values="v")
    with pytest.raises(ValueError, match="batch_size=\\[\\]"):
        GAE(gamma=0.9, lmbda=0.8)(TensorDict({}, batch_size=[]))


def test_done_without_feature_dim_is_unsqueezed():
    td = _batch()
    critic = _critic()
    expected = GAE(gamma=0.9, lmbda=0.8, value_network=critic)(td.clone())["advantage"]
    td.set(("next", "done"), td["next", "done"].squeeze(-1))
    td.set(("next", "terminated"), td["next", "terminated"].squeeze(-1))
    out = GAE(gamma=0.9, lmbda=0.8, value_network=critic)(td)["advantage"]
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vtrace_module_matches_reference(backend):
    td = _batch()
    critic = _critic()
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(torch.nn.Linear(4, 2), ["observation"], ["logits"]),
        ProbabilisticTensorDictModule(
            ["logits"], ["action"], distribution_class=torch.distributions.Categorical
        ),
    )
    v, nv = _values(td, critic)
    with torch.no_grad():
        log_pi = actor.get_dist(td).log_prob(td["action"]).unsqueeze(-1)
    VTrace(gamma=0.9, actor_network=actor, value_network=critic, c_thresh=0.9, backend=backend)(td)
    nxt = td["next"]
    adv, vs = ref.vtrace(
        0.9,
        log_pi,
        td["action_log_prob"],
        v,
        nv,
        nxt["reward"],
        nxt["done"],
        nxt["terminated"],
        1.0,
        0.9,
    )
    torch.testing.assert_close(td["advantage"], adv)
    torch.testing.assert_close(td["value_target"], vs)
    with pytest.raises(TypeError, match="get_dist"):
        VTrace(gamma=0.9, actor_network=torch.nn.Linear(1, 1))
    with pytest.raises(ValueError, match="rho_thresh >= c_thresh"):
        VTrace(gamma=0.9, actor_network=actor, rho_thresh=0.5, c_thresh=1.0)


def test_unknown_backend_is_refused_at_construction():
    with pytest.raises(ValueError, match="backend must be one of"):
        GAE(gamma=0.9, lmbda=0.9, backend="cpp")
