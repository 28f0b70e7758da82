"""PPO family, A2C and REINFORCE against plain torch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as Fn
from objectives_testlib import make_categorical_actor, make_normal_actor, make_value, transitions
from tensordict import TensorDict
from tensordict.nn import (
    CompositeDistribution,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import distributions as D

from rl_objectives import A2CLoss, ClipPPOLoss, KLPENPPOLoss, PPOLoss, ReinforceLoss
from rl_objectives.ppo import effective_sample_size


def batch(n=16):
    td = transitions(n, action="categorical")
    g = torch.Generator().manual_seed(1)
    td["action_log_prob"] = -torch.rand(n, generator=g) - 0.5
    td["advantage"] = torch.randn(n, 1, generator=g)
    td["value_target"] = torch.randn(n, 1, generator=g)
    td["state_value"] = torch.randn(n, 1, generator=g)
    td["logits"] = torch.randn(n, 4, generator=g)
    return td


def _ref(actor, critic, td):
    logits = actor.module[0].module(td["observation"])
    dist = D.Categorical(logits=logits)
    lw = dist.log_prob(td["action"]) - td["action_log_prob"]
    adv = td["advantage"].squeeze(-1)
    v = critic.module(td["observation"])
    return dist, lw, adv, v


@pytest.mark.parametrize("clip_value", [None, 0.1])
def test_clip_ppo_matches_plain_torch(clip_value):
    actor, critic = make_categorical_actor(), make_value()
    loss = ClipPPOLoss(
        actor,
        critic,
        clip_epsilon=(0.1, 0.3),
        clip_value=clip_value,
        entropy_coeff=0.05,
        critic_coeff=0.5,
        loss_critic_type="l2",
    )
    td = batch()
    out = loss(td)
    dist, lw, adv, v = _ref(actor, critic, td)
    r = lw.exp()
    gain = torch.minimum(r * adv, r.clamp(0.9, 1.3) * adv)
    torch.testing.assert_close(out["loss_objective"], -gain.mean())
    torch.testing.assert_close(out["loss_entropy"], -0.05 * dist.entropy().mean())
    vl = (td["value_target"] - v) ** 2
    if clip_value:
        vc = td["state_value"] + (v - td["state_value"]).clamp(-clip_value, clip_value)
        vl = torch.maximum(vl, (td["value_target"] - vc) ** 2)
    torch.testing.assert_close(out["loss_critic"], 0.5 * vl.mean())
    torch.testing.assert_close(out["kl_approx"], (-lw).mean().detach())
    assert "advantage" not in td.keys() or torch.equal(td["advantage"], batch()["advantage"])  # noqa: SIM118


def test_clip_ppo_diagnostics_match_plain_torch():
    actor, critic = make_categorical_actor(), make_value()
    td = batch()
    keys_before = set(td.keys(True, True))
    out = ClipPPOLoss(actor, critic, clip_epsilon=0.2)(td)
    assert set(td.keys(True, True)) == keys_before  # nothing written into the caller's data
    dist, lw, _, _ = _ref(actor, critic, td)
    lw = lw.detach()
    ratio = lw.exp()
    torch.testing.assert_close(out["kl_approx"], -lw.mean())
    torch.testing.assert_close(out["clip_fraction"], ((ratio < 0.8) | (ratio > 1.2)).float().mean())
    # TorchRL's log-space formula of the normalised effective sample size
    ess = (2 * lw.logsumexp(0) - (2 * lw).logsumexp(0)).exp() / lw.numel()
    torch.testing.assert_close(out["ESS"], ess)
    torch.testing.assert_close(out["entropy"], dist.entropy().mean().detach())
    for key in ("kl_approx", "clip_fraction", "ESS", "entropy"):
        assert not out[key].requires_grad, key


def test_effective_sample_size_does_not_overflow():
    lw = torch.tensor([0.0, 200.0, 200.0, -50.0])  # exp(200) overflows float32
    assert torch.isclose(effective_sample_size(lw), torch.tensor(0.5))
    assert torch.isclose(effective_sample_size(torch.full((5,), 100.0)), torch.tensor(1.0))


@pytest.mark.parametrize("critic_coeff", [1.0, 0.5])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("loss_type", ["smooth_l1", "l2"])
def test_ppo_critic_loss_matches_plain_torch(critic_coeff, reduction, loss_type):
    actor, critic = make_categorical_actor(), make_value()
    td = batch()
    loss = ClipPPOLoss(
        actor, critic, critic_coeff=critic_coeff, loss_critic_type=loss_type, reduction=reduction
    )
    out = loss(td)
    v = critic.module(td["observation"])
    fn = Fn.smooth_l1_loss if loss_type == "smooth_l1" else Fn.mse_loss
    per_sample = critic_coeff * fn(td["value_target"], v, reduction="none").squeeze(-1)
    expected = {"mean": per_sample.mean(), "sum": per_sample.sum(), "none": per_sample}
    torch.testing.assert_close(out["loss_critic"], expected[reduction])
    out["loss_critic"].sum().backward()
    assert all(p.grad is not None for p in critic.parameters())
    assert all(p.grad is None for p in actor.parameters())


def test_ppo_and_klpen_match_plain_torch():
    actor, critic = make_categorical_actor(), make_value()
    td = batch()
    out = PPOLoss(actor, critic, normalize_advantage=True, entropy_bonus=False)(td)
    dist, lw, adv, _v = _ref(actor, critic, td)
    nadv = (adv - adv.mean()) / adv.std()
    torch.testing.assert_close(out["loss_objective"], -(lw.exp() * nadv).mean())
    assert "loss_entropy" not in out.keys()  # noqa: SIM118
    kl_loss = KLPENPPOLoss(actor, critic, beta=2.0, dtarg=1e-6)
    out = kl_loss(td)
    kl = D.kl_divergence(D.Categorical(logits=td["logits"]), dist)
    torch.testing.assert_close(out["loss_objective"], -(lw.exp() * adv - 2.0 * kl).mean())
    assert float(kl_loss.beta) == 4.0  # kl above 1.5 * dtarg: beta doubled


def test_ppo_computes_gae_when_advantage_missing_and_critic_only_gets_critic_grad():
    actor, critic = make_categorical_actor(), make_value()
    loss = ClipPPOLoss(actor, critic)
    td = batch().exclude("advantage", "value_target")
    out = loss(td)
    assert "advantage" not in td.keys()  # noqa: SIM118 (the caller's data is not modified)
    out["loss_objective"].backward(retain_graph=True)
    assert all(p.grad is None for p in critic.parameters())
    loss.zero_grad(set_to_none=True)
    out["loss_critic"].backward()
    assert all(p.grad is None for p in actor.parameters())


def test_ppo_continuous_and_reduction_none():
    actor = make_normal_actor()
    td = transitions(8)
    td["action_log_prob"] = -torch.rand(8)
    td["advantage"] = torch.randn(8, 1)
    out = ClipPPOLoss(actor, reduction="none")(td)
    assert out["loss_objective"].shape == (8,)
    dist = actor.get_dist(td.select("observation"))
    torch.testing.assert_close(out["loss_entropy"], -0.01 * dist.entropy())


def test_ppo_composite_action_distribution():
    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 7)

        def forward(self, x):
            y = self.lin(x)
            return y[..., :2], y[..., 2:4].exp() + 0.1, y[..., 4:]

    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(Head(), ["observation"], [("params", "cont", "loc"), ("params", "cont", "scale"), ("params", "disc", "logits")]),
        ProbabilisticTensorDictModule(
            in_keys=["params"], out_keys=[("action", "cont"), ("action", "disc")],
            distribution_class=CompositeDistribution,
            distribution_kwargs={
                "distribution_map": {"cont": lambda loc, scale: D.Independent(D.Normal(loc, scale), 1), "disc": D.Categorical},
                "name_map": {"cont": ("action", "cont"), "disc": ("action", "disc")},
            },
            return_log_prob=True,
        ),
    )  # fmt: skip
    td = actor(TensorDict(observation=torch.randn(8, 3), batch_size=[8]))
    td = td.exclude("params").detach()
    td["advantage"] = torch.randn(8, 1)
    coeff = {("action", "cont_entropy"): 0.1, ("action", "disc_entropy"): 0.2}
    out = ClipPPOLoss(actor, entropy_coeff=coeff)(td)
    loc, scale, logits = actor.module[0].module(td["observation"])
    d_c, d_d = D.Independent(D.Normal(loc, scale), 1), D.Categorical(logits=logits)
    lp = d_c.log_prob(td["action", "cont"]) + d_d.log_prob(td["action", "disc"])
    prev = td["action", "cont_log_prob"] + td["action", "disc_log_prob"]
    torch.testing.assert_close(
        out["loss_objective"], -(torch.exp(lp - prev) * td["advantage"].squeeze(-1)).mean()
    )
    torch.testing.assert_close(
        out["loss_entropy"], -(0.1 * d_c.entropy() + 0.2 * d_d.entropy()).mean()
    )
    assert set(out["composite_entropy"].keys(True, True)) == set(coeff)


def test_missing_log_prob_names_key():
    td = batch().exclude("action_log_prob")
    with pytest.raises(KeyError, match=r"set_keys.sample_log_prob="):
        ClipPPOLoss(make_categorical_actor())(td)


def test_a2c_and_reinforce_match_plain_torch():
    actor, critic = make_categorical_actor(), make_value()
    td = batch()
    out = A2CLoss(actor, critic, entropy_coeff=0.1, loss_critic_type="l1")(td)
    dist, _, adv, v = _ref(actor, critic, td)
    lp = dist.log_prob(td["action"])
    torch.testing.assert_close(out["loss_objective"], -(lp * adv).mean())
    torch.testing.assert_close(out["loss_entropy"], -0.1 * dist.entropy().mean())
    torch.testing.assert_close(out["loss_critic"], Fn.l1_loss(v, td["value_target"]))
    out = ReinforceLoss(actor, critic)(td)
    torch.testing.assert_close(out["loss_actor"], -(lp * adv).mean())
    torch.testing.assert_close(out["loss_value"], Fn.smooth_l1_loss(td["value_target"], v))


def test_a2c_refuses_a_stored_action_that_requires_grad_and_reset_is_a_hook():
    from objectives_testlib import make_normal_actor, transitions

    td = transitions(8)
    td["advantage"] = torch.randn(8, 1)
    td["value_target"] = torch.randn(8, 1)
    loss = A2CLoss(make_normal_actor(), make_value())
    log_prob, dist = loss._log_probs(td)
    torch.testing.assert_close(log_prob, dist.log_prob(td["action"]))
    td["action"].requires_grad_()
    with pytest.raises(RuntimeError, match="stored action requires grad"):
        loss(td)
    loss.reset()  # TorchRL's hook: nothing to reset in A2C


@pytest.mark.parametrize(("cls", "family"), [(PPOLoss, "PPO"), (A2CLoss, "A2C")])
def test_clip_value_is_a_float_and_needs_the_stored_value(cls, family):
    with pytest.raises(ValueError, match="clip_value must be a float or a scalar tensor, got True"):
        cls(make_categorical_actor(), make_value(), clip_value=True)
    loss = cls(make_categorical_actor(), make_value(), clip_value=0.2)
    td = batch()
    td["advantage"] = torch.randn(*td.shape, 1)
    td["value_target"] = torch.randn(*td.shape, 1)
    with pytest.raises(KeyError, match=f"value_key passed to {family} exists"):
        loss(td.exclude("state_value"))
    assert ClipPPOLoss(make_categorical_actor(), make_value(), clip_value=True).clip_value == 0.2


@pytest.mark.parametrize("cls", [ClipPPOLoss, A2CLoss])
def test_the_policy_gives_the_action_and_log_prob_keys(cls):
    from tensordict.nn import (
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
        TensorDictModule,
    )
    from torch import nn

    body = TensorDictModule(nn.Linear(3, 4), [("agents", "observation")], [("agents", "logits")])
    actor = ProbabilisticTensorDictSequential(
        body,
        ProbabilisticTensorDictModule(
            [("agents", "logits")],
            [("agents", "action")],
            distribution_class=torch.distributions.Categorical,
            return_log_prob=True,
        ),
    )
    loss = cls(actor, make_value())
    assert loss.tensor_keys.action == ("agents", "action")
    assert loss.tensor_keys.sample_log_prob == ("agents", "action_log_prob")
    # the usual policy keeps the usual keys
    plain = cls(make_categorical_actor(), make_value())
    assert plain.tensor_keys.action == "action"
    assert plain.tensor_keys.sample_log_prob == "action_log_prob"
