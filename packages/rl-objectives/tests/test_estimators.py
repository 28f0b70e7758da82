"""Estimator modules: critic calls (batched, shifted, target params), keys, registry, errors."""

from __future__ import annotations

import pytest
import torch
from objectives_testlib import make_categorical_actor, make_value
from tensordict import TensorDict

from rl_objectives import DQNLoss, PPOLoss
from rl_objectives.value import (
    GAE,
    TD0Estimator,
    TD1Estimator,
    TDLambdaEstimator,
    ValueEstimators,
    VTrace,
    build_value_estimator,
    default_value_kwargs,
    register_value_estimator,
)
from rl_objectives.value import functional as F


def rollout(batch=(3,), steps=12, seed=0) -> TensorDict:
    """A [*B, T] rollout with auto-resets: obs[t+1] == next_obs[t] except after done."""
    g = torch.Generator().manual_seed(seed)
    shape = (*batch, steps)
    obs = torch.randn(*batch, steps + 1, 3, generator=g)
    terminated = torch.rand(*shape, 1, generator=g) < 0.15
    truncated = (torch.rand(*shape, 1, generator=g) < 0.15) & ~terminated
    done = terminated | truncated
    next_obs = obs[..., 1:, :].clone()
    # at done steps the true final observation differs from the next root observation
    final = torch.randn(*shape, 3, generator=g)
    next_obs = torch.where(done, final, next_obs)
    return TensorDict(
        {
            "observation": obs[..., :-1, :],
            "action": torch.randint(4, shape, generator=g),
            "action_log_prob": -torch.rand(shape, generator=g),
            ("next", "observation"): next_obs,
            ("next", "reward"): torch.randn(*shape, 1, generator=g),
            ("next", "done"): done,
            ("next", "terminated"): terminated,
            ("next", "truncated"): truncated,
        },
        batch_size=shape,
    )


@pytest.mark.parametrize("shifted", [False, True])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_gae_module_matches_functional(shifted, batch):
    critic = make_value()
    td = rollout(batch)
    GAE(gamma=0.9, lmbda=0.8, value_network=critic, shifted=shifted)(td)
    with torch.no_grad():
        v = critic.module(td["observation"])
        nv = critic.module(td["next", "observation"])
    adv, target = F.generalized_advantage_estimate(
        0.9, 0.8, v, nv, td["next", "reward"], td["next", "done"], td["next", "terminated"]
    )
    torch.testing.assert_close(td["advantage"], adv)
    torch.testing.assert_close(td["value_target"], target)
    torch.testing.assert_close(td["next", "state_value"], nv)
    assert not td["advantage"].requires_grad


def test_gae_time_dim_first():
    critic = make_value()
    td = rollout((3,))
    td_t = td.transpose(0, 1).contiguous()  # [T, B]
    GAE(gamma=0.9, lmbda=0.8, value_network=critic)(td)
    GAE(gamma=0.9, lmbda=0.8, value_network=critic, time_dim=0)(td_t)
    torch.testing.assert_close(td_t["advantage"].transpose(0, 1), td["advantage"])


def test_gae_target_params_and_average():
    critic = make_value()
    td = rollout()
    target = TensorDict.from_module(critic).data.clone().apply(lambda p: p * 0)
    GAE(gamma=0.9, lmbda=0.8, value_network=critic, average_gae=True)(td, target_params=target)
    adv = td["advantage"]
    torch.testing.assert_close(td["next", "state_value"], torch.zeros_like(adv) + 0)
    assert abs(float(adv.mean())) < 1e-5 and abs(float(adv.std()) - 1) < 1e-4


def test_gae_differentiable_keeps_graph_to_the_inputs_not_the_critic():
    critic = make_value()
    td = rollout()
    obs = td["observation"].requires_grad_()
    td["next", "observation"] = td["next", "observation"].requires_grad_()
    GAE(gamma=0.9, lmbda=0.8, value_network=critic, differentiable=True)(td)
    assert td["value_target"].requires_grad
    td["advantage"].sum().backward()
    # as TorchRL's hold_out_net: the inputs get gradients, the critic's parameters none
    assert obs.grad is not None and obs.grad.abs().sum() > 0
    assert all(p.grad is None for p in critic.parameters())


def test_vtrace_differentiable_holds_the_actor_and_critic_out():
    actor, critic = make_categorical_actor(), make_value()
    td = rollout()
    obs = td["observation"].requires_grad_()
    VTrace(gamma=0.9, actor_network=actor, value_network=critic, differentiable=True)(td)
    td["advantage"].sum().backward()
    assert obs.grad is not None
    assert all(p.grad is None for p in (*actor.parameters(), *critic.parameters()))


@pytest.mark.parametrize(
    ("cls", "kwargs", "fn"),
    [
        (TD0Estimator, {}, lambda nv, r, d, t: F.td0_return_estimate(0.9, nv, r, t)),
        (TD1Estimator, {}, lambda nv, r, d, t: F.td1_return_estimate(0.9, nv, r, d, t)),
        (TDLambdaEstimator, {"lmbda": 0.7}, lambda nv, r, d, t: F.td_lambda_return_estimate(0.9, 0.7, nv, r, d, t)),
    ],
)  # fmt: skip
def test_td_modules_read_values_from_data(cls, kwargs, fn):
    td = rollout()
    td["state_value"] = torch.randn(*td.shape, 1)
    td["next", "state_value"] = torch.randn(*td.shape, 1)
    cls(gamma=0.9, **kwargs)(td)
    nxt = td["next"]
    expected = fn(nxt["state_value"], nxt["reward"], nxt["done"], nxt["terminated"])
    torch.testing.assert_close(td["value_target"], expected)
    torch.testing.assert_close(td["advantage"], expected - td["state_value"])
    est = cls(gamma=0.9, **kwargs)
    torch.testing.assert_close(est.value_estimate(td, next_value=nxt["state_value"]), expected)


@pytest.mark.parametrize(
    ("est", "needs_value"),
    [
        (lambda: TD0Estimator(gamma=0.9, average_rewards=True), False),
        (lambda: TDLambdaEstimator(gamma=0.9, lmbda=0.7, average_rewards=True), False),
        (lambda: GAE(gamma=0.9, lmbda=0.8), True),
    ],
    ids=["td0_average", "tdlambda_average", "gae"],
)
def test_value_estimate_from_next_value_matches_forward(est, needs_value):
    """``value_estimate(next_value=...)`` (the off-policy losses' path) gives the same target
    as a full pass; estimators that need ``V(s)`` read it from the data."""
    td = rollout()
    td["state_value"] = torch.randn(*td.shape, 1)
    td["next", "state_value"] = torch.randn(*td.shape, 1)
    nv = td["next", "state_value"]
    target = est().value_estimate(
        td.exclude("state_value") if not needs_value else td, next_value=nv
    )
    torch.testing.assert_close(target, est()(td.clone())["value_target"])
    if needs_value:
        with pytest.raises(KeyError, match="state_value"):
            est().value_estimate(td.exclude("state_value"), next_value=nv)


def test_vtrace_module_matches_functional():
    actor = make_categorical_actor()
    critic = make_value()
    td = rollout()
    VTrace(gamma=0.9, actor_network=actor, value_network=critic)(td)
    with torch.no_grad():
        log_pi = actor.get_dist(td).log_prob(td["action"]).unsqueeze(-1)
        v = critic.module(td["observation"])
        nv = critic.module(td["next", "observation"])
    adv, vs = F.vtrace_advantage_estimate(
        0.9, log_pi, td["action_log_prob"].unsqueeze(-1), v, nv,
        td["next", "reward"], td["next", "done"], td["next", "terminated"],
    )  # fmt: skip
    torch.testing.assert_close(td["advantage"], adv)
    torch.testing.assert_close(td["value_target"], vs)


def test_set_keys_routes_every_entry():
    td = rollout()
    td = td.rename_key_(("next", "reward"), ("next", "r"))
    td["v"] = torch.zeros(*td.shape, 1)
    td["next", "v"] = torch.ones(*td.shape, 1)
    est = TD0Estimator(gamma=0.5).set_keys(
        reward="r", value="v", advantage="adv", value_target="tgt"
    )
    est(td)
    assert "adv" in td.keys() and "tgt" in td.keys()  # noqa: SIM118
    with pytest.raises(ValueError, match="unknown key name"):
        est.set_keys(rewards="x")


def test_missing_key_names_key_and_set_keys_name():
    td = rollout()
    del td["next", "reward"]
    with pytest.raises(KeyError, match=r"next.*reward.*set_keys.reward="):
        GAE(gamma=0.9, lmbda=0.9, value_network=make_value())(td)


def test_debug_flag_raises_on_non_finite():
    td = rollout()
    td["next", "reward"][0, 0] = float("nan")
    GAE(gamma=0.9, lmbda=0.9, value_network=make_value())(td.clone())  # silent without debug
    with pytest.raises(ValueError, match="non-finite"):
        GAE(gamma=0.9, lmbda=0.9, value_network=make_value(), debug=True)(td)


def test_registry_plugs_new_estimator_into_losses():
    class HalfTD0(TD0Estimator):
        def _returns(self, next_value, reward, done, terminated, time_dim):
            return 0.5 * super()._returns(next_value, reward, done, terminated, time_dim)

    register_value_estimator("half_td0", default_kwargs={"gamma": 0.8})(HalfTD0)
    assert default_value_kwargs("half_td0") == {"gamma": 0.8}
    net = __import__("objectives_testlib").make_action_value()
    loss = DQNLoss(net, action_space="categorical").make_value_estimator("half_td0")
    assert isinstance(loss.value_estimator, HalfTD0) and loss.value_estimator.gamma == 0.8
    # a ready estimator module is accepted as is
    custom = TD0Estimator(gamma=0.3)
    assert loss.make_value_estimator(custom).value_estimator is custom


def test_make_value_estimator_by_name_and_support_check():
    loss = PPOLoss(make_categorical_actor(), make_value(), gamma=0.97)
    loss.make_value_estimator("tdlambda", lmbda=0.5)
    est = loss.value_estimator
    assert isinstance(est, TDLambdaEstimator) and est.gamma == 0.97 and est.lmbda == 0.5
    loss.make_value_estimator(ValueEstimators.VTrace)
    assert isinstance(loss.value_estimator, VTrace)
    dqn = DQNLoss(__import__("objectives_testlib").make_action_value(), action_space="categorical")
    with pytest.raises(NotImplementedError, match="does not support"):
        dqn.make_value_estimator(ValueEstimators.GAE)
    with pytest.raises(KeyError, match="unknown value estimator"):
        build_value_estimator("nope")


def test_multiagent_gae_broadcasts_team_signals_against_a_loop():
    from tensordict import TensorDict

    from rl_objectives import MultiAgentGAE, ValueEstimators
    from rl_objectives.value import build_value_estimator

    torch.manual_seed(0)
    t, n_agents, gamma, lmbda = 6, 3, 0.9, 0.8
    value, next_value = torch.randn(t, n_agents, 1), torch.randn(t, n_agents, 1)
    reward = torch.randn(t, 1)
    done = torch.zeros(t, 1, dtype=torch.bool)
    done[2] = True
    td = TensorDict(
        {
            "state_value": value,
            ("next", "state_value"): next_value,
            ("next", "reward"): reward,
            ("next", "done"): done,
            ("next", "terminated"): done,
        },
        batch_size=[t],
    )
    out = MultiAgentGAE(gamma=gamma, lmbda=lmbda)(td.clone())
    for agent in range(n_agents):
        adv, running = torch.zeros(t), 0.0
        for i in reversed(range(t)):
            not_done = 0.0 if bool(done[i]) else 1.0
            delta = reward[i, 0] + gamma * not_done * next_value[i, agent, 0] - value[i, agent, 0]
            running = delta + gamma * lmbda * not_done * running
            adv[i] = running
        torch.testing.assert_close(out["advantage"][:, agent, 0], adv)
    torch.testing.assert_close(out["value_target"], out["advantage"] + value)
    averaged = MultiAgentGAE(gamma=gamma, lmbda=lmbda, average_gae=True)(td.clone())["advantage"]
    torch.testing.assert_close(averaged.mean(0), torch.zeros(n_agents, 1), atol=1e-6, rtol=0)
    assert isinstance(build_value_estimator(ValueEstimators.MAGAE), MultiAgentGAE)


@pytest.mark.parametrize("shifted", [False, True])
@pytest.mark.parametrize(
    "chunks", [{"value_chunk_size": 3}, {"num_chunks": 4}, {"num_chunk": 2, "value_chunk_dim": 1}]
)
def test_chunked_critic_calls_give_the_unchunked_values(shifted, chunks):
    critic = make_value()
    calls = []
    critic.register_forward_hook(lambda *_: calls.append(1))
    td = rollout(batch=(4,), steps=5)
    expected = GAE(gamma=0.9, lmbda=0.8, value_network=critic, shifted=shifted)(td.clone())
    n_plain = len(calls)
    out = GAE(gamma=0.9, lmbda=0.8, value_network=critic, shifted=shifted, **chunks)(td.clone())
    assert len(calls) - n_plain > n_plain  # the critic ran in several calls
    torch.testing.assert_close(out["advantage"], expected["advantage"])
    torch.testing.assert_close(out["value_target"], expected["value_target"])
    with pytest.raises(ValueError, match="mutually exclusive"):
        GAE(gamma=0.9, lmbda=0.8, value_chunk_size=2, num_chunks=2)


@pytest.mark.parametrize("skip", [True, False, None])
def test_skip_existing_uses_the_values_in_the_data(skip):
    critic = make_value()
    td = rollout()
    td["state_value"] = torch.ones(*td.shape, 1)
    td["next", "state_value"] = torch.ones(*td.shape, 1)
    out = TD1Estimator(gamma=0.9, value_network=critic, skip_existing=skip)(td)
    from_data = bool(skip)
    assert (out["state_value"] == 1).all() == from_data


def test_vtrace_scores_a_composite_policy_on_the_whole_tensordict():
    from tensordict.nn import (
        CompositeDistribution,
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
        TensorDictModule,
    )

    body = TensorDictModule(torch.nn.Linear(3, 4), ["observation"], [("params", "head", "logits")])
    actor = ProbabilisticTensorDictSequential(
        body,
        ProbabilisticTensorDictModule(
            ["params"],
            ["action"],
            distribution_class=CompositeDistribution,
            distribution_kwargs={
                "distribution_map": {"head": torch.distributions.Categorical},
                "name_map": {"head": ("action", "head")},
            },
        ),
    )
    td = rollout()
    td["action"] = TensorDict(head=td["action"], batch_size=td.shape)
    td["action", "head_log_prob"] = td.pop("action_log_prob")
    est = VTrace(gamma=0.9, actor_network=actor, value_network=make_value())
    est.set_keys(sample_log_prob=[("action", "head_log_prob")])
    out = est(td.clone())
    # the same as a plain categorical actor with the same weights
    plain = make_categorical_actor()
    flat = td.clone()
    flat["action"], flat["action_log_prob"] = td["action", "head"], td["action", "head_log_prob"]
    lin = body.module
    plain[0].module = torch.nn.Sequential(lin)
    ref = VTrace(gamma=0.9, actor_network=plain, value_network=est.value_network)(flat)
    torch.testing.assert_close(out["advantage"], ref["advantage"])


def test_an_unknown_key_name_is_a_key_error_and_a_value_error():
    # TorchRL's estimators raise KeyError, its losses ValueError: both catch it
    with pytest.raises(KeyError, match="unknown key name"):
        GAE(gamma=0.9, lmbda=0.9).set_keys(unknown_key="x")
    with pytest.raises(ValueError, match="unknown key name"):
        PPOLoss(make_categorical_actor()).set_keys(unknown_key="x")
