"""Dreamer v1 and DreamerV3 losses against plain-torch computations on fixed tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch.distributions import Categorical, Normal, kl_divergence

from rl_objectives import (
    DreamerActorLoss,
    DreamerModelLoss,
    DreamerV3ActorLoss,
    DreamerV3ModelLoss,
    DreamerV3ValueLoss,
    DreamerValueLoss,
    SoftUpdate,
    ValueEstimators,
    categorical_kl_balanced,
    categorical_kl_terms,
)
from rl_objectives._dreamer_common import (
    default_bins,
    lambda_return,
    symexp,
    symlog,
    two_hot_cross_entropy,
    two_hot_encode,
)

torch.manual_seed(0)


def _lambda_ref(reward, next_value, gamma, lmbda):
    """Plain backward loop over [N, H, 1]."""
    H = reward.shape[1]
    gamma = (
        torch.as_tensor(gamma).expand_as(reward)
        if not isinstance(gamma, torch.Tensor) or gamma.ndim == 0
        else gamma
    )
    out = [None] * H
    g = next_value[:, -1]
    for t in reversed(range(H)):
        boot = (
            next_value[:, t] if t == H - 1 else (1 - lmbda) * next_value[:, t] + lmbda * out[t + 1]
        )
        out[t] = reward[:, t] + gamma[:, t] * boot
    del g
    return torch.stack(out, 1)


def test_lambda_return_matches_loop():
    r, v = torch.randn(4, 6, 1), torch.randn(4, 6, 1)
    torch.testing.assert_close(
        lambda_return(r, v, 0.9, 0.7), _lambda_ref(r, v, torch.tensor(0.9), 0.7)
    )
    g = torch.rand(4, 6, 1)
    torch.testing.assert_close(lambda_return(r, v, g, 0.7), _lambda_ref(r, v, g, 0.7))


def test_symlog_and_two_hot_copies():
    x = torch.tensor([-7.0, 0.0, 0.5, 300.0])
    torch.testing.assert_close(symexp(symlog(x)), x)
    bins = default_bins()
    code = two_hot_encode(x, bins)
    torch.testing.assert_close((code * bins).sum(-1), x, rtol=1e-4, atol=1e-4)
    logits = torch.randn(4, 255)
    torch.testing.assert_close(
        two_hot_cross_entropy(logits, x, bins), -(code * logits.log_softmax(-1)).sum(-1)
    )


# ----------------------------------------------------------------------------- v1 model


def _fixed_world_model(outputs: dict):
    """A 'world model' writing fixed tensors under 'next' (reads the true reward)."""

    keys = list(outputs)

    def fn(r):
        return tuple(outputs[k] for k in keys)

    return TensorDictModule(
        fn, in_keys=[("next", "true_reward")], out_keys=[("next", k) for k in keys]
    )


def _v1_outputs(B=3, T=6, D=4):
    return {
        "prior_mean": torch.randn(B, T, D),
        "prior_std": torch.rand(B, T, D) + 0.1,
        "posterior_mean": torch.randn(B, T, D),
        "posterior_std": torch.rand(B, T, D) + 0.1,
        "reco_pixels": torch.randn(B, T, 2, 5, 5),
        "reward": torch.randn(B, T, 1),
    }


@pytest.mark.parametrize("burn_in", [0, 2])
@pytest.mark.parametrize("delayed_clamp", [False, True])
def test_dreamer_model_loss_matches_reference(burn_in, delayed_clamp):
    outs = _v1_outputs()
    pixels, reward = torch.randn(3, 6, 2, 5, 5), torch.randn(3, 6, 1)
    td = TensorDict({("next", "pixels"): pixels, ("next", "reward"): reward}, [3, 6])
    loss = DreamerModelLoss(
        _fixed_world_model(outs),
        free_nats=1.5,
        delayed_clamp=delayed_clamp,
        lambda_kl=0.5,
        burn_in=burn_in,
    )
    losses, out = loss(td)
    s = slice(burn_in, None)
    kl = kl_divergence(
        Normal(outs["posterior_mean"][:, s], outs["posterior_std"][:, s]),
        Normal(outs["prior_mean"][:, s], outs["prior_std"][:, s]),
    ).sum(-1)
    kl_ref = kl.mean().clamp_min(1.5) if delayed_clamp else kl.clamp_min(1.5).mean()
    torch.testing.assert_close(losses["loss_model_kl"], 0.5 * kl_ref)
    reco_ref = ((outs["reco_pixels"][:, s] - pixels[:, s]) ** 2).sum((-3, -2, -1)).mean()
    torch.testing.assert_close(losses["loss_model_reco"], reco_ref)
    torch.testing.assert_close(
        losses["loss_model_reward"], ((outs["reward"][:, s] - reward[:, s]) ** 2).mean()
    )
    torch.testing.assert_close(out["next", "true_reward"], reward)
    assert losses["loss_model_kl"].shape == ()


@pytest.mark.parametrize("burn_in", [0, 2])
def test_dreamer_model_loss_continuation_bce(burn_in):
    outs = {**_v1_outputs(), "continue_pred": torch.randn(3, 6, 1)}
    term = torch.zeros(3, 6, 1, dtype=torch.bool)
    term[0, -1] = term[2, 3] = True
    td = TensorDict(
        {
            ("next", "pixels"): torch.randn(3, 6, 2, 5, 5),
            ("next", "reward"): torch.randn(3, 6, 1),
            ("next", "terminated"): term,
        },
        [3, 6],
    )
    losses, _ = DreamerModelLoss(_fixed_world_model(outs), lambda_continue=0.7, burn_in=burn_in)(td)
    s = slice(burn_in, None)
    p, y = torch.sigmoid(outs["continue_pred"][:, s]), 1.0 - term[:, s].float()
    bce = -(y * p.log() + (1 - y) * (1 - p).log()).mean()
    torch.testing.assert_close(losses["loss_model_continue"], 0.7 * bce)
    # without 'terminated', 'done' is the target; without lambda_continue no entry
    td_done = td.clone()
    td_done.rename_key_(("next", "terminated"), ("next", "done"))
    losses, _ = DreamerModelLoss(_fixed_world_model(outs), lambda_continue=0.7, burn_in=burn_in)(
        td_done
    )
    torch.testing.assert_close(losses["loss_model_continue"], 0.7 * bce)
    plain, _ = DreamerModelLoss(_fixed_world_model(outs))(td)
    assert "loss_model_continue" not in list(plain.keys())
    # a world model without a continuation head: a clear error
    with pytest.raises(KeyError, match="ContinuationHead"):
        DreamerModelLoss(_fixed_world_model(_v1_outputs()), lambda_continue=1.0)(td)
    with pytest.raises(ValueError, match="lambda_continue"):
        DreamerModelLoss(_fixed_world_model(outs), lambda_continue=-1.0)


def test_dreamer_model_loss_bad_input():
    outs = _v1_outputs(T=3)
    td = TensorDict(
        {("next", "pixels"): torch.zeros(3, 3, 2, 5, 5), ("next", "reward"): torch.zeros(3, 3, 1)},
        [3, 3],
    )
    with pytest.raises(ValueError, match=r"T=3 are not longer than burn_in=3"):
        DreamerModelLoss(_fixed_world_model(outs), burn_in=3)(td)
    with pytest.raises(ValueError, match="sequences shaped"):
        DreamerModelLoss(_fixed_world_model(outs))(td[:, 0][0])
    loss = DreamerModelLoss(_fixed_world_model(outs)).set_keys(pixels="observation")
    with pytest.raises(KeyError, match=r"\('next', 'observation'\).*'pixels' key"):
        loss(td)


# ----------------------------------------------------------------------------- imagination


class _ToyImagination:
    """A duck-typed imagination env: s' = tanh(s W + a U), reward = s' . c (no rl_envs)."""

    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.W = torch.nn.Parameter(torch.randn(3, 3, generator=g) * 0.5)
        self.U = torch.nn.Parameter(torch.randn(2, 3, generator=g))
        self.c = torch.nn.Parameter(torch.randn(3, generator=g))

    def parameters(self):
        return iter([self.W, self.U, self.c])

    def reset(self, td):
        return td

    def transition(self, s, a):
        s2 = torch.tanh(s @ self.W + a @ self.U)
        return s2, (s2 * self.c).sum(-1, keepdim=True)

    def rollout(self, max_steps, policy, auto_reset=False, tensordict=None):
        td, steps = tensordict, []
        for _ in range(max_steps):
            td = policy(td.copy())
            s2, r = self.transition(td["state"], td["action"])
            td.set(
                "next",
                TensorDict({"state": s2, "belief": td["belief"], "reward": r}, td.batch_size),
            )
            steps.append(td)
            td = td["next"].exclude("reward")
        return torch.stack(steps, -1)


class _Actor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, s, b):
        return torch.tanh(self.lin(s)) + 0 * b.sum(-1, keepdim=True)


def _actor_value():
    actor = TensorDictModule(_Actor(), in_keys=["state", "belief"], out_keys=["action"])
    value = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["state"], out_keys=["state_value"])
    return actor, value


@pytest.mark.parametrize("discount_loss", [True, False])
def test_dreamer_actor_and_value_losses_match_reference(discount_loss):
    env = _ToyImagination()
    actor, value = _actor_value()
    loss = DreamerActorLoss(actor, value, env, imagination_horizon=5, discount_loss=discount_loss)
    loss.make_value_estimator(ValueEstimators.TDLambda, gamma=0.9, lmbda=0.8)
    start = TensorDict(state=torch.randn(2, 4, 3), belief=torch.randn(2, 4, 1), batch_size=[2, 4])
    losses, fake = loss(start)
    assert fake.batch_size == (8, 5)
    # reference: plain loop
    s = start["state"].reshape(8, 3)
    rewards, next_values = [], []
    for _ in range(5):
        a = actor.module(s, torch.zeros(8, 1))
        s, r = env.transition(s, a)
        rewards.append(r)
        next_values.append(value.module(s))
    rew, nv = torch.stack(rewards, 1), torch.stack(next_values, 1)
    target = _lambda_ref(rew, nv, torch.tensor(0.9), 0.8)
    w = (0.9 ** torch.arange(5.0)).reshape(1, 5, 1) if discount_loss else torch.ones(1, 5, 1)
    torch.testing.assert_close(losses["loss_actor"], -(target * w).sum((1, 2)).mean())
    torch.testing.assert_close(fake["lambda_target"], target.detach())
    # gradients reach the actor, not the world model nor the value
    losses["loss_actor"].backward()
    assert actor.module.lin.weight.grad is not None
    assert env.W.grad is None and value.module.weight.grad is None
    assert env.W.requires_grad
    # value loss
    vloss = DreamerValueLoss(value, discount_loss=discount_loss, gamma=0.9)
    vl, _ = vloss(fake)
    pred = value.module(fake["state"])
    torch.testing.assert_close(
        vl["loss_value"], (w * (pred - target.detach()) ** 2).sum((1, 2)).mean()
    )


def test_dreamer_actor_and_value_losses_with_continuation():
    env = _ToyImagination()
    actor, value = _actor_value()
    cont = TensorDictModule(
        torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Sigmoid()),
        in_keys=["state"],
        out_keys=["continuation"],
    )
    loss = DreamerActorLoss(actor, value, env, imagination_horizon=5, continuation_model=cont)
    loss.make_value_estimator(ValueEstimators.TDLambda, gamma=0.9, lmbda=0.8)
    start = TensorDict(state=torch.randn(6, 3), belief=torch.randn(6, 1), batch_size=[6])
    losses, fake = loss(start)
    # reference: plain loop, discount gamma * c[t] of the imagined next state
    s, rewards, next_values, conts = start["state"], [], [], []
    for _ in range(5):
        a = actor.module(s, torch.zeros(6, 1))
        s, r = env.transition(s, a)
        rewards.append(r)
        next_values.append(value.module(s))
        conts.append(cont.module(s))
    rew, nv, c = torch.stack(rewards, 1), torch.stack(next_values, 1), torch.stack(conts, 1)
    target = _lambda_ref(rew, nv, 0.9 * c, 0.8)
    w = torch.cat([torch.ones(6, 1, 1), 0.9 * c[:, :-1]], 1).cumprod(1).detach()
    torch.testing.assert_close(losses["loss_actor"], -(target * w).sum((1, 2)).mean())
    torch.testing.assert_close(fake["discount_weight"], w)
    torch.testing.assert_close(fake["next", "continuation"], c.detach())
    # the continuation head is held out of the actor's gradient
    losses["loss_actor"].backward()
    assert cont.module[0].weight.grad is None and actor.module.lin.weight.grad is not None
    # the value loss weights by the stored discount_weight, not gamma^t
    vl, _ = DreamerValueLoss(value, gamma=0.9)(fake)
    pred = value.module(fake["state"])
    torch.testing.assert_close(
        vl["loss_value"], (w * (pred - target.detach()) ** 2).sum((1, 2)).mean()
    )


def test_dreamer_actor_loss_errors():
    env = _ToyImagination()
    actor, value = _actor_value()
    with pytest.raises(TypeError, match="make_value_estimator"):
        DreamerActorLoss(actor, value, env, gamma=0.9)
    with pytest.raises(KeyError, match=r"\['belief'\]"):
        DreamerActorLoss(actor, value, env)(TensorDict(state=torch.zeros(2, 3), batch_size=[2]))
    with pytest.raises(KeyError, match="lambda_target"):
        DreamerValueLoss(value)(TensorDict(state=torch.zeros(2, 3), batch_size=[2]))


# ----------------------------------------------------------------------------- v3


def _cat_kl(q_logits, p_logits, unimix=0.0):
    def dist(lg):
        p = lg.softmax(-1)
        return Categorical(probs=(1 - unimix) * p + unimix / lg.shape[-1])

    return kl_divergence(dist(q_logits), dist(p_logits))


def test_categorical_kl_terms_and_balanced():
    q, p = torch.randn(3, 5, 4, 6, requires_grad=True), torch.randn(3, 5, 4, 6, requires_grad=True)
    dyn, rep = categorical_kl_terms(q, p, free_nats=1.0, unimix=0.01)
    ref = _cat_kl(q.detach(), p.detach(), 0.01).sum(-1).clamp_min(1.0).mean()
    torch.testing.assert_close(dyn, ref)
    torch.testing.assert_close(rep, ref)
    # dynamics trains the prior only, representation the posterior only
    (gq,) = torch.autograd.grad(dyn, q, allow_unused=True)
    assert gq is None or gq.abs().sum() == 0
    (gp,) = torch.autograd.grad(rep, p, allow_unused=True)
    assert gp is None or gp.abs().sum() == 0
    bal = categorical_kl_balanced(q, p, alpha=0.8, free_bits=0.1)
    torch.testing.assert_close(
        bal, _cat_kl(q.detach(), p.detach()).clamp_min(0.1).mean(), rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("kl_mode", ["balanced", "separate"])
def test_dreamer_v3_model_loss_matches_reference(kl_mode):
    B, T = 2, 5
    outs = {
        "prior_logits": torch.randn(B, T, 4, 3),
        "posterior_logits": torch.randn(B, T, 4, 3),
        "reco_pixels": torch.randn(B, T, 7),
        "reward_logits": torch.randn(B, T, 255),
        "continue_pred": torch.randn(B, T, 1),
    }
    obs, reward = torch.randn(B, T, 7) * 5, torch.randn(B, T, 1) * 10
    term = torch.zeros(B, T, 1, dtype=torch.bool)
    term[0, -1] = True
    td = TensorDict(
        {("next", "pixels"): obs, ("next", "reward"): reward, ("next", "terminated"): term}, [B, T]
    )
    loss = DreamerV3ModelLoss(
        _fixed_world_model(outs),
        kl_mode=kl_mode,
        lambda_continue=0.5,
        lambda_dynamic=0.5,
        unimix=0.01,
        free_bits=1.0,
    )
    losses, _ = loss(td)
    if kl_mode == "separate":
        kl = (
            _cat_kl(outs["posterior_logits"], outs["prior_logits"], 0.01)
            .sum(-1)
            .clamp_min(1.0)
            .mean()
        )
        torch.testing.assert_close(losses["loss_model_dynamic"], 0.5 * kl)
        torch.testing.assert_close(losses["loss_model_representation"], 0.1 * kl)
    else:
        kl = _cat_kl(outs["posterior_logits"], outs["prior_logits"]).clamp_min(1.0).mean()
        torch.testing.assert_close(losses["loss_model_kl"], kl, rtol=1e-4, atol=1e-5)
    reco = ((symlog(obs) - symlog(outs["reco_pixels"])) ** 2).sum(-1).mean()
    torch.testing.assert_close(losses["loss_model_reco"], reco)
    code = two_hot_encode(reward.squeeze(-1), default_bins())
    ce = -(code * outs["reward_logits"].log_softmax(-1)).sum(-1).mean()
    torch.testing.assert_close(losses["loss_model_reward"], ce)
    target = (~term).float()
    p = torch.sigmoid(outs["continue_pred"])
    bce = -(target * p.log() + (1 - target) * (1 - p).log()).mean()
    torch.testing.assert_close(losses["loss_model_continue"], 0.5 * bce)
    bad = DreamerV3ModelLoss(_fixed_world_model({**outs, "reward_logits": torch.randn(B, T, 9)}))
    with pytest.raises(ValueError, match="255 bins"):
        bad(td)


def test_dreamer_v3_actor_loss_reinforce_with_return_normalisation():
    env = _ToyImagination()

    class Stoch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, s):
            a = torch.tanh(self.lin(s))
            return a, -(a**2).sum(-1)  # a fake log-prob, differentiable in the weights

    actor = TensorDictModule(Stoch(), in_keys=["state"], out_keys=["action", "action_log_prob"])
    value = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["state"], out_keys=["state_value"])
    cont = TensorDictModule(
        lambda s: torch.sigmoid(s[..., :1]), in_keys=["state"], out_keys=["continuation"]
    )
    loss = DreamerV3ActorLoss(
        actor, value, env, continuation_model=cont, imagination_horizon=4, use_reinforce=True,
        entropy_bonus=0.1, return_normalization_rate=0.5,
    )  # fmt: skip
    loss.make_value_estimator(ValueEstimators.TDLambda, gamma=0.95, lmbda=0.9)
    start = TensorDict(state=torch.randn(6, 3), belief=torch.zeros(6, 1), batch_size=[6])
    losses, fake = loss(start)
    # reference
    s, logps, rewards, nvs, conts, vals = start["state"], [], [], [], [], []
    for _ in range(4):
        vals.append(value.module(s))
        a, lp = actor.module(s)
        s, r = env.transition(s, a)
        logps.append(lp.unsqueeze(-1))
        rewards.append(r)
        nvs.append(value.module(s))
        conts.append(torch.sigmoid(s[..., :1]))
    rew, nv, c = torch.stack(rewards, 1), torch.stack(nvs, 1), torch.stack(conts, 1)
    lp, v = torch.stack(logps, 1), torch.stack(vals, 1)
    g = 0.95 * c
    target = _lambda_ref(rew, nv, g, 0.9)
    w = torch.cat([torch.ones(6, 1, 1), g[:, :-1]], 1).cumprod(1)
    lo, hi = np.quantile(target.detach().numpy().ravel(), [0.05, 0.95])
    scale = max(1.0, 0.5 * hi - 0.5 * lo)
    adv = ((target - v) / scale).detach()
    ref = -(w * lp * adv).sum((1, 2)).mean() - 0.1 * (-(w * lp).sum((1, 2)).mean())
    torch.testing.assert_close(losses["loss_actor"], ref.detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(losses["return_high"], torch.tensor(0.5 * hi, dtype=torch.float32))
    torch.testing.assert_close(fake["discount_weight"], w.detach())
    # eval mode does not move the statistics
    loss.eval()
    loss(start)
    torch.testing.assert_close(loss.return_high, torch.tensor(0.5 * hi, dtype=torch.float32))


@pytest.mark.parametrize("mode", ["symlog_mse", "two_hot"])
def test_dreamer_v3_value_loss_with_slow_critic(mode):
    class Critic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 255)

        def forward(self, s):
            logits = self.lin(s)
            return (logits.softmax(-1) * default_bins()).sum(-1, keepdim=True), logits

    critic = TensorDictModule(
        Critic(), in_keys=["state"], out_keys=["state_value", "state_value_logits"]
    )
    loss = DreamerV3ValueLoss(critic, value_loss=mode, slow_critic_regularization=0.5)
    updater = SoftUpdate(loss, tau=0.02)
    with torch.no_grad():
        critic.module.lin.weight.add_(0.1)  # online moves away from the slow copy
    fake = TensorDict(
        state=torch.randn(4, 5, 3), lambda_target=torch.randn(4, 5, 1) * 3,
        discount_weight=torch.rand(4, 5, 1), batch_size=[4, 5],
    )  # fmt: skip
    losses, _ = loss(fake)
    value, logits = critic.module(fake["state"])
    slow = Critic()
    with torch.no_grad():
        slow.lin.weight.copy_(critic.module.lin.weight - 0.1)
        slow.lin.bias.copy_(critic.module.lin.bias)
    slow_value, _ = slow(fake["state"])
    target = fake["lambda_target"].squeeze(-1)
    if mode == "two_hot":
        main = two_hot_cross_entropy(logits, target, default_bins())
        reg = two_hot_cross_entropy(logits, slow_value.squeeze(-1), default_bins())
    else:
        main = (symlog(value.squeeze(-1)) - symlog(target)) ** 2
        reg = (symlog(value.squeeze(-1)) - symlog(slow_value.squeeze(-1))) ** 2
    w = fake["discount_weight"].squeeze(-1)
    torch.testing.assert_close(
        losses["loss_value"], (w * (main + 0.5 * reg)).mean(), rtol=1e-4, atol=1e-4
    )
    updater.step()
    torch.testing.assert_close(
        loss.target_value_model_params["module", "lin", "weight"],
        critic.module.lin.weight.detach() - 0.1 * 0.98,
    )
