"""REDQ against a plain-torch loop over ten critics (values and gradients); stacked parameters."""

from __future__ import annotations

import pytest
import torch
from objectives_testlib import QNet, make_normal_actor, make_qvalue, transitions
from tensordict.nn import TensorDictModule, TensorDictSequential

from rl_objectives import REDQLoss, SoftUpdate

# These checks build losses with target parameters and no updater (their numerics do not
# need one): TorchRL's warning about it is tested in test_target_updater_warning.py.
pytestmark = pytest.mark.filterwarnings("ignore:No target network updater:UserWarning")


def _slice(params, i):
    return {k.removeprefix("module."): v[i] for k, v in params.flatten_keys(".").items()}


@pytest.mark.parametrize("strategy", ["vmap", "loop", "deactivate_vmap"])
def test_redq_matches_a_plain_torch_loop_over_critics(strategy):
    actor = make_normal_actor()
    n, m = 10, 3
    loss = REDQLoss(actor, make_qvalue(), num_qvalue_nets=n, sub_sample_len=m, gamma=0.9,
                    alpha_init=0.5, loss_function="l2",
                    deactivate_vmap=strategy == "deactivate_vmap")  # fmt: skip
    if strategy != "deactivate_vmap":
        loss._stacked_q.strategy = strategy
    live, tgt = loss.qvalue_network_params, loss.target_qvalue_network_params
    with torch.no_grad():
        for p in tgt.values(True, True):
            p.add_(0.1 * torch.randn_like(p))
    td = transitions(16)
    torch.manual_seed(4)
    out = loss(td)
    torch.manual_seed(4)
    obs, act, nobs = td["observation"], td["action"], td["next", "observation"]
    loc, scale = actor.module[0].module(torch.cat([obs, nobs]))
    dist = actor.module[1].distribution_class(loc, scale)
    a = dist.rsample()
    lp = dist.log_prob(a)
    subset = torch.randperm(n)[:m].sort().values
    base = QNet()

    def q(i, o, x, params):
        return torch.func.functional_call(base, _slice(params, i), (o, x)).squeeze(-1)

    q_actor = torch.stack([q(i, obs, a[:16], live.detach()) for i in range(n)])
    ref_actor = (0.5 * lp[:16] - q_actor).mean()
    with torch.no_grad():
        nv = torch.stack([q(int(j), nobs, a[16:], tgt) - 0.5 * lp[16:] for j in subset]).amin(0)
        y = td["next", "reward"].squeeze(-1) + 0.9 * (~td["next", "terminated"]).squeeze(-1) * nv
    pred = torch.stack([q(i, obs, act, live) for i in range(n)])
    ref_q = ((pred - y) ** 2).mean()
    ref_alpha = (-loss.log_alpha.exp() * (lp.detach() - 2.0)).mean()
    torch.testing.assert_close(out["loss_actor"], ref_actor)
    torch.testing.assert_close(out["loss_qvalue"], ref_q)
    torch.testing.assert_close(out["loss_alpha"], ref_alpha)
    torch.testing.assert_close(td["td_error"], ((pred - y) ** 2).amax(0).detach())
    params = [*actor.parameters(), *live.values(True, True), loss.log_alpha]
    ours = torch.autograd.grad(out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"], params)
    theirs = torch.autograd.grad(ref_actor + ref_q + ref_alpha, params)
    for x, z in zip(ours, theirs, strict=True):
        torch.testing.assert_close(x, z)


def test_redq_parameters_targets_and_isolation():
    loss = REDQLoss(make_normal_actor(), make_qvalue(), num_qvalue_nets=4, target_entropy=-2.0)
    names = [name for name, _ in loss.named_parameters()]
    assert len(names) == len(set(names))
    assert not any("target" in name for name in names)
    assert loss.qvalue_network_params.batch_size == (4,)
    weights = loss.qvalue_network_params["module", "net", "0", "weight"]
    assert not torch.equal(weights[0], weights[1])  # re-initialised copies
    out = loss(transitions(8))
    out["loss_actor"].backward(retain_graph=True)
    assert all(p.grad is None for p in loss.qvalue_network_params.values(True, True))
    assert all(p.grad is not None for p in loss.actor_network.parameters())
    loss.zero_grad(set_to_none=True)
    out["loss_qvalue"].backward()
    assert all(p.grad is not None for p in loss.qvalue_network_params.values(True, True))
    assert all(p.grad is None for p in loss.actor_network.parameters())
    tgt = loss.target_qvalue_network_params
    before = tgt["module", "net", "0", "weight"].clone()
    updater = SoftUpdate(loss, tau=0.5)
    with torch.no_grad():
        loss.qvalue_network_params["module", "net", "0", "weight"].add_(1.0)
    updater.step()
    torch.testing.assert_close(tgt["module", "net", "0", "weight"], before + 0.5)
    # reduction="none": per-critic and per-sample losses
    loss = REDQLoss(make_normal_actor(), make_qvalue(), num_qvalue_nets=4, reduction="none",
                    scalar_output_mode="exclude")  # fmt: skip
    out = loss(transitions(8))
    assert out["loss_qvalue"].shape == (4, 8) and out["loss_alpha"].shape == (2, 8)
    assert "alpha" not in out


def test_redq_alpha_clamp_passes_the_gradient():
    loss = REDQLoss(make_normal_actor(), make_qvalue(), num_qvalue_nets=3, alpha_init=100.0,
                    target_entropy=-2.0)  # fmt: skip
    torch.testing.assert_close(loss.alpha, torch.tensor(10.0))
    out = loss(transitions(8))
    out["loss_alpha"].backward()
    assert loss.log_alpha.grad is not None and loss.log_alpha.grad != 0


def test_redq_generic_critic_path_and_errors():
    # a TensorDictSequential critic is not a plain module: evaluated slice by slice
    seq = TensorDictSequential(make_qvalue())
    loss = REDQLoss(make_normal_actor(), seq, num_qvalue_nets=3, target_entropy=-2.0)
    assert not loss._stacked_q.fast
    out = loss(transitions(8))
    out["loss_qvalue"].backward()
    assert all(p.grad is not None for p in loss.qvalue_network_params.values(True, True))
    with pytest.raises(NotImplementedError, match="gSDE"):
        REDQLoss(make_normal_actor(), make_qvalue(), gSDE=True)
    bad = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["state_action_value"])
    with pytest.raises(ValueError, match="expected \\(8, 1\\)"):
        REDQLoss(make_normal_actor(), bad, num_qvalue_nets=3)(transitions(8))
    td = transitions(8).exclude("observation")
    with pytest.raises(KeyError):
        REDQLoss(make_normal_actor(), make_qvalue(), num_qvalue_nets=3)(td)


class _Composite:
    """A spec-like Composite: ``keys()``, ``[key]`` and its own (container) ``shape``."""

    def __init__(self, shape, **entries):
        self.shape, self._entries = torch.Size(shape), entries

    def keys(self, *args):
        return self._entries.keys()

    def __getitem__(self, key):
        return self._entries[key]


def test_redq_target_entropy_auto_from_a_composite_spec():
    from types import SimpleNamespace

    spec = _Composite((), action=SimpleNamespace(shape=torch.Size([3])))
    loss = REDQLoss(make_normal_actor(), make_qvalue(), num_qvalue_nets=2, action_spec=spec)
    assert loss.target_entropy.item() == -3.0
    spec = _Composite((5,), action=SimpleNamespace(shape=torch.Size([5, 4])))
    loss = REDQLoss(make_normal_actor(), make_qvalue(), num_qvalue_nets=2, action_spec=spec)
    assert loss.target_entropy.item() == -4.0


def test_redq_accepts_a_sequential_actor_ending_with_a_distribution():
    from tensordict.nn import (
        NormalParamExtractor,
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
    )
    from torch import distributions as D

    def normal(loc, scale):
        return D.Independent(D.Normal(loc, scale), 1)

    common = TensorDictModule(torch.nn.Linear(3, 8), ["observation"], ["hidden"])
    head = ProbabilisticTensorDictSequential(
        TensorDictModule(torch.nn.Sequential(torch.nn.Linear(8, 4), NormalParamExtractor()),
                         ["hidden"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=normal),
    )  # fmt: skip
    actor = TensorDictSequential(common, head)  # as ActorValueOperator.get_policy_operator()
    loss = REDQLoss(actor, make_qvalue(), num_qvalue_nets=3, target_entropy=-2.0)
    td = transitions(8)
    torch.manual_seed(0)
    out = loss(td)
    out["loss_actor"].backward()
    assert common.module.weight.grad is not None
    # same value as the equivalent single probabilistic actor
    flat = ProbabilisticTensorDictSequential(common, *head.module)
    loss2 = REDQLoss(flat, make_qvalue(), num_qvalue_nets=3, target_entropy=-2.0)
    with torch.no_grad():
        for a, b in zip(loss2.qvalue_network_params.values(True, True),
                        loss.qvalue_network_params.values(True, True), strict=True):  # fmt: skip
            a.copy_(b)
    torch.manual_seed(0)
    torch.testing.assert_close(loss2(transitions(8))["loss_actor"], out["loss_actor"])
