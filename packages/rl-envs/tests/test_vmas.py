"""VmasEnv / VmasWrapper: specs per group, equality with the raw VMAS loop, resets, errors."""

from __future__ import annotations

import io

import pytest
import torch

vmas = pytest.importorskip("vmas")

from rl_envs import check_env_specs, step_mdp  # noqa: E402
from rl_envs.libs.marl import MarlGroupMapType  # noqa: E402
from rl_envs.libs.vmas import VmasEnv, VmasWrapper  # noqa: E402

B, N = 4, 3


def _nav(**kw):
    kw.setdefault("max_steps", 6)
    return VmasEnv("navigation", num_envs=B, n_agents=N, seed=0, **kw)


def _raw(**kw):
    kw.setdefault("max_steps", 6)
    return vmas.make_env("navigation", num_envs=B, n_agents=N, seed=0, **kw)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"continuous_actions": False},
        {"continuous_actions": False, "categorical_actions": False},
        {"continuous_actions": False, "multidiscrete_actions": True},
        {"continuous_actions": False, "multidiscrete_actions": True, "categorical_actions": False},
    ],
)
def test_check_env_specs(kw):
    env = _nav(**kw)
    check_env_specs(env, break_when_any_done="both")


def test_spec_shapes_per_group():
    env = _nav()
    assert env.batch_size == torch.Size([B])
    assert env.group_map == {"agents": ["agent_0", "agent_1", "agent_2"]}
    assert env.full_observation_spec["agents", "observation"].shape == (B, N, 18)
    assert env.full_action_spec["agents", "action"].shape == (B, N, 2)
    assert env.full_reward_spec["agents", "reward"].shape == (B, N, 1)
    assert set(env.done_keys) == {"done", "terminated", "truncated"}
    assert env.full_done_spec["done"].shape == (B, 1)
    assert env.action_keys == [("agents", "action")]
    assert env.reward_keys == [("agents", "reward")]
    low = env.full_action_spec["agents", "action"].space.low
    assert torch.equal(low, -torch.ones(B, N, 2))


def test_discrete_specs():
    cat = _nav(continuous_actions=False)
    assert cat.full_action_spec["agents", "action"].shape == (B, N)
    assert cat.full_action_spec["agents", "action"].dtype == torch.int64
    hot = _nav(continuous_actions=False, categorical_actions=False)
    assert hot.full_action_spec["agents", "action"].shape == (B, N, 9)
    assert hot.full_action_spec["agents", "action"].dtype == torch.int64


def _raw_rollout(raw, actions):
    raw.seed(3)
    obs = raw.reset()
    out = [torch.stack(obs, 1)]
    rews, dones = [], []
    for a in actions:
        obs, rew, done, _ = raw.step(list(a.unbind(1)))
        out.append(torch.stack(obs, 1))
        rews.append(torch.stack(rew, 1))
        dones.append(done)
    return out, rews, dones


@pytest.mark.parametrize("discrete", [False, True])
def test_matches_raw_vmas(discrete):
    torch.manual_seed(0)
    if discrete:
        actions = [torch.randint(0, 9, (B, N)) for _ in range(5)]
    else:
        actions = [torch.rand(B, N, 2) * 2 - 1 for _ in range(5)]
    obs, rews, dones = _raw_rollout(_raw(continuous_actions=not discrete), actions)
    env = _nav(continuous_actions=not discrete)
    env.set_seed(3)
    td = env.reset()
    torch.testing.assert_close(td["agents", "observation"], obs[0], rtol=0, atol=0)
    for t, a in enumerate(actions):
        td["agents", "action"] = a
        td = env.step(td)
        nxt = td["next"]
        torch.testing.assert_close(nxt["agents", "observation"], obs[t + 1], rtol=0, atol=0)
        torch.testing.assert_close(nxt["agents", "reward"], rews[t].unsqueeze(-1), rtol=0, atol=0)
        assert torch.equal(nxt["done"], dones[t].unsqueeze(-1))
        td = td["next"].exclude(("agents", "reward"))


def test_one_hot_equals_categorical():
    torch.manual_seed(1)
    idx = [torch.randint(0, 9, (B, N)) for _ in range(4)]
    results = []
    for cat in (True, False):
        env = _nav(continuous_actions=False, categorical_actions=cat)
        env.set_seed(2)
        td = env.reset()
        obs = []
        for a in idx:
            td["agents", "action"] = a if cat else torch.nn.functional.one_hot(a, 9)
            td = env.step(td)["next"].exclude(("agents", "reward"))
            obs.append(td["agents", "observation"])
        results.append(torch.stack(obs))
    assert torch.equal(results[0], results[1])


def test_max_steps_sets_terminated_and_rollout_resets():
    env = _nav(max_steps=3)
    td = env.rollout(7, break_when_any_done=False)
    done = td["next", "done"].squeeze(-1)
    assert done[:, 2].all() and done[:, 5].all()
    assert not done[:, [0, 1, 3, 4, 6]].any()
    assert torch.equal(td["next", "terminated"], td["next", "done"])
    assert not td["next", "truncated"].any()
    # the step after a done starts a fresh episode (auto reset)
    assert not td["done"][:, 3].any()
    short = env.rollout(7)
    assert short.shape == (B, 3)


def test_terminated_truncated_option():
    env = _nav(max_steps=2, terminated_truncated=True)
    td = env.rollout(2)
    assert td["next", "truncated"][:, -1].all()
    assert not td["next", "terminated"].any()
    assert torch.equal(td["next", "done"], td["next", "truncated"])
    check_env_specs(env)


def test_partial_reset_matches_reset_at():
    raw = _raw()
    raw.seed(0)
    raw.reset()
    actions = [torch.rand(B, N, 2) * 2 - 1 for _ in range(2)]
    for a in actions:
        raw.step(list(a.unbind(1)))
    raw.seed(11)
    raw.reset_at(1)
    want = torch.stack(raw.get_from_scenario(True, False, False, False)[0], 1)

    env = _nav()
    env.set_seed(0)
    td = env.reset()
    for a in actions:
        td["agents", "action"] = a
        td = env.step(td)["next"].exclude(("agents", "reward"))
    before = td["agents", "observation"].clone()
    env.set_seed(11)
    td["_reset"] = torch.tensor([False, True, False, False]).unsqueeze(-1)
    out = env.reset(td)
    got = out["agents", "observation"]
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    keep = [0, 2, 3]
    assert torch.equal(got[keep], before[keep])
    assert not torch.equal(got[1], before[1])
    assert "_reset" not in out.keys()  # noqa: SIM118 (TensorDict has no __contains__)


def test_group_maps_route_agents():
    torch.manual_seed(0)
    actions = [torch.rand(B, N, 2) * 2 - 1 for _ in range(3)]
    obs, rews, _ = _raw_rollout(_raw(), actions)
    maps = {
        "one_per_agent": MarlGroupMapType.ONE_GROUP_PER_AGENT,
        "split": {"second": ["agent_1"], "rest": ["agent_2", "agent_0"]},
    }
    for group_map in maps.values():
        env = _nav(group_map=group_map)
        check_env_specs(env)
        env.set_seed(3)
        td = env.reset()
        for t, a in enumerate(actions):
            for g, members in env.group_map.items():
                cols = [int(m.split("_")[1]) for m in members]
                td[g, "action"] = a[:, cols]
            td = env.step(td)
            for g, members in env.group_map.items():
                cols = [int(m.split("_")[1]) for m in members]
                assert td["next", g, "observation"].shape == (B, len(cols), 18)
                torch.testing.assert_close(
                    td["next", g, "observation"], obs[t + 1][:, cols], rtol=0, atol=0
                )
                torch.testing.assert_close(
                    td["next", g, "reward"], rews[t][:, cols].unsqueeze(-1), rtol=0, atol=0
                )
            td = td["next"].exclude(*[(g, "reward") for g in env.group_map])


def test_default_group_map_splits_by_prefix():
    env = VmasEnv("simple_adversary", num_envs=2, seed=0)
    assert env.group_map == {"adversary": ["adversary_0"], "agent": ["agent_0", "agent_1"]}
    assert env.full_observation_spec["adversary", "observation"].shape == (2, 1, 8)
    assert env.full_observation_spec["agent", "observation"].shape == (2, 2, 10)
    check_env_specs(env)


def test_wrapper_of_built_env():
    env = VmasWrapper(_raw(), categorical_actions=True)
    assert env.batch_size == (B,) and env.n_agents == N
    check_env_specs(env)
    assert "navigation" in VmasEnv.available_envs


@pytest.mark.parametrize(
    ("group_map", "match"),
    [
        ({"agents": ["agent_0", "agent_1", "agent_7"]}, r"unknown agents \['agent_7'\]"),
        ({"agents": ["agent_0", "agent_1"]}, r"agents \['agent_2'\] are in no group"),
        ({"a": ["agent_0", "agent_1"], "b": ["agent_1", "agent_2"]}, "'agent_1' is in group"),
        ({"a": [], "b": ["agent_0", "agent_1", "agent_2"]}, "group 'a' is empty"),
        ({"a": "agent_0"}, "must be a list of agent names"),
    ],
)
def test_bad_group_map(group_map, match):
    with pytest.raises(ValueError, match=match):
        _nav(group_map=group_map)


def test_heterogeneous_group_refused():
    with pytest.raises(ValueError, match="different observation spaces"):
        VmasEnv("simple_adversary", num_envs=2, group_map=MarlGroupMapType.ALL_IN_ONE_GROUP)


def test_policy_with_wrong_agent_count():
    env = _nav()
    td = env.reset()
    td["agents"] = td["agents"][:, :2]
    td["agents", "action"] = torch.zeros(B, 2, 2)
    with pytest.raises((KeyError, ValueError), match=r"agents.*action"):
        env.step(td)


def test_wrapper_errors():
    raw = _raw()
    with pytest.raises(TypeError, match="needs a VMAS env"):
        VmasWrapper(object())
    with pytest.raises(TypeError, match="batch_size"):
        VmasWrapper(raw, batch_size=[B + 1])
    with pytest.raises(TypeError, match="device"):
        VmasWrapper(raw, device="meta")
    with pytest.raises(ValueError, match="unknown scenario 'navigatoin'"):
        VmasEnv("navigatoin", num_envs=2)
    with pytest.raises(ValueError, match="num_envs must be >= 1"):
        VmasEnv("navigation", num_envs=0)


@pytest.mark.parametrize("discrete", [False, True])
def test_get_set_state_resume_is_bit_identical(discrete):
    def make():
        return _nav(max_steps=4, continuous_actions=not discrete)

    env = make()
    keys = {"reward_keys": env.reward_keys, "action_keys": env.action_keys}
    torch.manual_seed(0)
    root = step_mdp(env.rollout(3, break_when_any_done=False)[..., -1], **keys)
    buf = io.BytesIO()
    torch.save({"env": env.get_state(), "root": root}, buf)
    torch.manual_seed(1)
    ref = env.rollout(6, auto_reset=False, tensordict=root, break_when_any_done=False)
    assert ref["next", "done"].any()  # the continuation crosses a reset (VMAS's RNG)
    make().rollout(3)  # another VMAS env moves VMAS's process-wide RNG state
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=False)
    fresh = make()
    fresh.set_state(ckpt["env"])
    torch.manual_seed(1)
    got = fresh.rollout(6, auto_reset=False, tensordict=ckpt["root"], break_when_any_done=False)
    for key in ref.keys(True, True):
        assert torch.equal(ref[key], got[key]), key


def test_set_state_from_another_env_is_refused():
    state = _nav().get_state()
    with pytest.raises(ValueError, match="num_envs=4 and agents"):
        VmasEnv("navigation", num_envs=2, n_agents=N).set_state(state)
    with pytest.raises(ValueError, match="scenario 'navigation'"):
        VmasEnv("flocking", num_envs=B, n_agents=N).set_state(state)


@pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")  # EnvBase's probe, first
def test_nan_action_raises_naming_the_agent_instead_of_a_bare_assertion():
    env = VmasEnv("navigation", num_envs=2, n_agents=2, seed=0)
    td = env.rand_action(env.reset())
    action = td.get(("agents", "action")).clone()
    action[1, 1, 0] = float("nan")
    td.set(("agents", "action"), action)
    with pytest.raises(ValueError, match=r"agent 'agent_1'.*NaN or inf in env rows \[1\]"):
        env.step(td)
