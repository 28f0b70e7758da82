"""GymEnv / GymWrapper: specs of every space, flags, pixels, frame_skip, seeding, vector envs."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_envs import GymEnv, GymWrapper, ParallelEnv, check_env_specs, step_mdp

gym = pytest.importorskip("gymnasium")
spaces = gym.spaces


def assert_same(a, b):
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        assert torch.equal(a[key], b[key]), key


class ScriptedEnv(gym.Env):
    """Plays back scripted (terminated, truncated) flags; obs = step count."""

    def __init__(self, flags, obs_space=None, act_space=None):
        self.flags = list(flags)
        self.observation_space = obs_space or spaces.Box(-1e6, 1e6, (1,), np.float32)
        self.action_space = act_space or spaces.Discrete(2)
        self.i = 0
        self.t = 0

    def _obs(self):
        if isinstance(self.observation_space, spaces.Box):
            return np.array([self.t], np.float32)
        return self.observation_space.sample()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        term, trunc = self.flags[self.i % len(self.flags)]
        self.i += 1
        self.t += 1
        return self._obs(), float(self.t), term, trunc, {"t": self.t}


@pytest.mark.parametrize(
    "name", ["CartPole-v1", "Pendulum-v1", "HalfCheetah-v5", "InvertedDoublePendulum-v5"]
)
def test_check_env_specs(name):
    env = GymEnv(name)
    env.set_seed(0)
    check_env_specs(env)
    r = env.rollout(10, break_when_any_done=False)
    assert r["next", "reward"].dtype == torch.float32
    assert r["observation"].dtype == torch.from_numpy(env.env.observation_space.sample()).dtype


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=12))
def test_done_is_terminated_or_truncated(flags):
    env = GymWrapper(ScriptedEnv(flags), categorical_action_encoding=True)
    n = 2 * len(flags)
    for fast in (True, False):
        r = env.rollout(n, break_when_any_done=False, backend="gym" if fast else "generic")
        term, trunc = r["next", "terminated"].flatten(), r["next", "truncated"].flatten()
        expect = [flags[i % len(flags)] for i in range(n)]
        assert term.tolist() == [f[0] for f in expect]
        assert trunc.tolist() == [f[1] for f in expect]
        assert torch.equal(r["next", "done"], r["next", "terminated"] | r["next", "truncated"])
        # after every done the next root is a fresh reset (obs 0), else it is the last next obs
        for t in range(1, n):
            want = 0.0 if r["next", "done"][t - 1] else r["next", "observation"][t - 1].item()
            assert r["observation"][t].item() == want


def test_break_when_any_done_stops_at_first_done():
    env = GymWrapper(ScriptedEnv([(False, False), (False, True)]))
    r = env.rollout(10)
    assert r.batch_size == (2,) and r["next", "truncated"][-1].item()


def test_structured_spaces():
    obs_space = spaces.Dict(
        {
            "pos": spaces.Box(-1, 1, (2,), np.float32),
            "grid": spaces.MultiBinary(3),
            "nested": spaces.Dict({"k": spaces.Discrete(4, start=1)}),
            "pair": spaces.Tuple((spaces.Discrete(3), spaces.MultiDiscrete([2, 5]))),
        }
    )
    act_space = spaces.Tuple((spaces.Discrete(3), spaces.Box(-1, 1, (2,), np.float64)))
    env = GymWrapper(ScriptedEnv([(False, False)], obs_space, act_space))
    spec = env.observation_spec
    assert spec["pos"].shape == (2,) and spec["grid"].shape == (3,)
    assert spec["nested", "k"].dtype == torch.int64
    assert set(spec["pair"].keys()) == {"0", "1"}
    assert env.full_action_spec["action", "0"].shape == (3,)  # one-hot
    assert env.full_action_spec["action", "1"].dtype == torch.float64
    check_env_specs(env)
    r = env.rollout(5)
    assert ((r["nested", "k"] >= 0) & (r["nested", "k"] < 4)).all()  # start=1 shifted to 0


def test_multidiscrete_and_multibinary_actions():
    for act_space, cat in [
        (spaces.MultiDiscrete([3, 2]), True),
        (spaces.MultiDiscrete([3, 2]), False),
        (spaces.MultiBinary(4), False),
    ]:
        env = GymWrapper(ScriptedEnv([(False, False)], act_space=act_space), cat)
        check_env_specs(env)


def test_info_keys():
    env = GymEnv("HalfCheetah-v5", info_keys=["x_position"])
    env.set_seed(0)
    check_env_specs(env)
    r = env.rollout(5)
    qpos0 = env.env.unwrapped.data.qpos[0]
    assert r["next", "x_position"][-1].item() == pytest.approx(qpos0, abs=1e-6)


def test_pixels():
    env = GymEnv("CartPole-v1", from_pixels=True, pixels_only=False)
    check_env_specs(env)
    r = env.rollout(3)
    assert r["pixels"].dtype == torch.uint8 and r["pixels"].shape[-1] == 3
    assert r["next", "pixels"].float().std() > 0
    assert "observation" in r
    assert "observation" not in GymEnv("CartPole-v1", from_pixels=True).observation_spec


def test_frame_skip_matches_repeated_raw_steps():
    env = GymEnv("Pendulum-v1", frame_skip=3)
    raw = gym.make("Pendulum-v1")
    env.set_seed(5)
    td = env.reset()
    raw.reset(seed=5)
    raw.reset()
    action = np.array([0.7], np.float32)
    total = 0.0
    for _ in range(3):
        obs, rew, *_ = raw.step(action)
        total += rew
    td = env.step(td.set("action", torch.from_numpy(action)))
    np.testing.assert_array_equal(td["next", "observation"].numpy(), obs)
    assert td["next", "reward"].item() == pytest.approx(total, rel=1e-6)


@pytest.mark.parametrize("name", ["CartPole-v1", "HalfCheetah-v5"])
def test_seeding_determinism(name):
    env = GymEnv(name)
    runs = []
    for _ in range(2):
        env.set_seed(3)
        torch.manual_seed(3)
        runs.append(env.rollout(100, break_when_any_done=False))
    assert_same(*runs)


@pytest.mark.parametrize("with_policy", [False, True])
def test_fast_path_equals_generic_loop(with_policy):
    env = GymEnv("CartPole-v1")
    policy = (lambda td: td.set("action", env.action_spec.rand())) if with_policy else None
    runs = []
    for backend in ("gym", "generic"):
        env.set_seed(1)
        torch.manual_seed(1)
        runs.append(env.rollout(300, policy, break_when_any_done=False, backend=backend))
    assert_same(*runs)


def test_raw_loop_reference_cartpole():
    """Our rollout replays exactly the transitions of a hand-written gymnasium loop."""
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    env.set_seed(0)
    r = env.rollout(200, break_when_any_done=False)
    raw = gym.make("CartPole-v1")
    raw.reset(seed=0)
    obs, _ = raw.reset()
    for t in range(200):
        np.testing.assert_array_equal(r["observation"][t].numpy(), obs)
        obs, _rew, term, trunc, _ = raw.step(int(r["action"][t]))
        np.testing.assert_array_equal(r["next", "observation"][t].numpy(), obs)
        assert (r["next", "terminated"][t].item(), r["next", "truncated"][t].item()) == (
            term,
            trunc,
        )
        if term or trunc:
            obs, _ = raw.reset()


@pytest.mark.parametrize("mode", ["NEXT_STEP", "SAME_STEP", "DISABLED"])
def test_vector_env_autoreset_modes_lose_and_invent_nothing(mode):
    """Each sub-env's transitions equal those of an independent env with the same actions."""
    n, steps = 3, 80
    vec = gym.make_vec(
        "CartPole-v1",
        num_envs=n,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode[mode]},
    )
    env = GymWrapper(vec, categorical_action_encoding=True)
    assert env.batch_size == (n,)
    check_env_specs(env)
    env.set_seed(0)
    torch.manual_seed(0)
    r = env.rollout(steps, break_when_any_done=False)
    assert r["next", "done"].sum() >= 3  # episode boundaries were crossed
    for i in range(n):
        single = gym.make("CartPole-v1")
        single.reset(seed=i)  # vector reset(seed=s) seeds sub-env i with s + i
        obs, _ = single.reset()
        for t in range(steps):
            np.testing.assert_array_equal(r["observation"][i, t].numpy(), obs)
            obs, _, term, trunc, _ = single.step(int(r["action"][i, t]))
            np.testing.assert_array_equal(r["next", "observation"][i, t].numpy(), obs)
            assert r["next", "terminated"][i, t].item() == term
            assert r["next", "truncated"][i, t].item() == trunc
            if term or trunc:
                obs, _ = single.reset()


def test_gymenv_num_envs_and_partial_reset():
    env = GymEnv("CartPole-v1", num_envs=2)
    td = env.reset()
    td = step_mdp(env.rand_step(td))
    before = td["observation"].clone()
    td.set("_reset", torch.tensor([[True], [False]]))
    out = env.reset(td)
    assert torch.equal(out["observation"][1], before[1])
    assert not torch.equal(out["observation"][0], before[0])


def test_missing_gymnasium_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    with pytest.raises(ImportError, match=r"rl-envs\[gym\]"):
        GymEnv("CartPole-v1")


def test_unsupported_space_error():
    env = ScriptedEnv([(False, False)], obs_space=spaces.Text(5))
    with pytest.raises(TypeError, match="Unsupported Gymnasium space"):
        GymWrapper(env)


def test_policy_next_entries_are_kept_and_carried_by_both_loops():
    """A policy writing ("next", "state") (a recurrent state): kept in the output and
    carried to the next root by the fast path and the generic loop alike, across resets."""
    env = GymEnv("CartPole-v1")

    def policy(td):
        state = td.get("state", None)
        if state is None:
            state = torch.zeros(1)
            td.set("state", state)
        td.set("action", env.action_spec.rand())
        return td.set(("next", "state"), state + 1)

    runs = []
    for backend in ("gym", "generic"):
        env.set_seed(1)
        torch.manual_seed(1)
        runs.append(env.rollout(120, policy, break_when_any_done=False, backend=backend))
    assert_same(*runs)
    r = runs[0]
    assert r["next", "done"].any()  # an episode boundary was crossed
    steps = torch.arange(120, dtype=torch.float32).unsqueeze(-1)
    assert torch.equal(r["state"], steps)
    assert torch.equal(r["next", "state"], steps + 1)
    td, root = env.step_and_maybe_reset(policy(env.reset()))
    assert td["next", "state"].item() == 1.0 and root["state"].item() == 1.0


@pytest.mark.parametrize("n_before", [7, 10])  # mid-episode; at the episode's last step
@pytest.mark.parametrize("num_envs", [0, 2])
@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1", "HalfCheetah-v5"])
def test_get_set_state_resume_is_bit_identical(name, num_envs, n_before, assert_resume_is_exact):
    ref = assert_resume_is_exact(
        lambda: GymEnv(name, num_envs=num_envs, max_episode_steps=10), n_before, 25
    )
    assert ref["next", "done"].any()  # the continuation crosses episode boundaries


def test_get_set_state_same_step_autoreset_holds_the_reset_obs(assert_resume_is_exact):
    def make():
        vec = gym.make_vec(
            "CartPole-v1",
            num_envs=3,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        )
        return GymWrapper(vec)

    ref = assert_resume_is_exact(make, 15, 60)
    assert ref["next", "done"].any()


def test_get_set_state_errors():
    env = GymEnv("CartPole-v1")
    env.reset()
    with pytest.raises(ValueError, match="wrapper chain"):
        GymWrapper(gym.make("CartPole-v1").unwrapped).set_state(env.get_state())
    vec = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")])
    try:
        with pytest.raises(NotImplementedError, match="AsyncVectorEnv"):
            GymWrapper(vec).get_state()
    finally:
        vec.close()


class _OneHotNet(torch.nn.Module):
    def __init__(self, n_obs, n_act, categorical, with_logits):
        super().__init__()
        self.lin = torch.nn.Linear(n_obs, n_act)
        self.categorical, self.with_logits = categorical, with_logits

    def forward(self, obs):
        logits = self.lin(obs.to(torch.float32))
        idx = logits.argmax(-1)
        action = idx if self.categorical else torch.nn.functional.one_hot(idx, logits.shape[-1])
        return (action, logits) if self.with_logits else action


class _Twice(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, obs):
        action = self.net(obs)
        return action, action * 3


@pytest.mark.parametrize(
    ("name", "categorical", "with_logits"),
    [
        ("CartPole-v1", False, False),
        ("CartPole-v1", True, True),
        ("Pendulum-v1", False, False),
        ("Pendulum-v1", False, True),
    ],
)
def test_tensordict_module_policy_fast_path_equals_generic_loop(name, categorical, with_logits):
    """A plain TensorDictModule runs on tensors in the fast path: same output as the
    generic loop (TensorDict per step), across episode boundaries, extra outputs included."""
    from tensordict.nn import TensorDictModule

    torch.manual_seed(0)
    env = GymEnv(name, categorical_action_encoding=categorical, max_episode_steps=30)
    out_keys = ["action", "logits"] if with_logits else ["action"]
    if name == "CartPole-v1":
        net = _OneHotNet(4, 2, categorical, with_logits)
    else:
        net = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Tanh())
        if with_logits:
            net = _Twice(net)
    policy = TensorDictModule(net, ["observation"], out_keys)
    runs = []
    for backend in ("gym", "generic"):
        env.set_seed(2)
        runs.append(env.rollout(70, policy, break_when_any_done=False, backend=backend))
    assert_same(*runs)
    assert runs[0]["next", "done"].sum() >= 2
    if with_logits:
        assert runs[0]["logits"].shape[0] == 70


def test_single_env_vector_has_batched_reward_spec_and_rolls_out_with_reward_sum():
    from rl_envs import RewardSum, TransformedEnv, check_env_specs

    base = GymEnv("CartPole-v1", num_envs=1)
    assert base.batch_size == (1,) and base.reward_spec.shape == (1, 1)
    env = TransformedEnv(base, RewardSum())
    env.set_seed(0)
    check_env_specs(env)
    rollout = env.rollout(500, break_when_any_done=True)
    assert rollout["episode_reward"].shape == (*rollout.shape, 1)


def test_get_library_name_and_close_state():
    env = GymEnv("CartPole-v1")
    assert env.get_library_name(env._env) == "gymnasium"
    assert (
        GymWrapper.get_library_name(gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")]))
        == "gymnasium"
    )
    assert not env.is_closed
    env.close(raise_if_closed=False)
    assert env.is_closed


def test_num_workers_builds_a_parallel_env_of_gym_envs():
    env = GymEnv("CartPole-v1", num_workers=2, max_episode_steps=3)
    try:
        assert isinstance(env, ParallelEnv) and env.num_workers == 2
        env.set_seed(0)
        r = env.rollout(4, break_when_any_done=False)
        assert r.shape == (2, 4)
        # the other arguments reach every worker's GymEnv: each truncates after 3 steps
        # (CartPole cannot fall within 3 steps)
        assert r["next", "truncated"].squeeze(-1).tolist() == [[False, False, True, False]] * 2
    finally:
        env.close()
    assert type(GymEnv("CartPole-v1", num_workers=1)) is GymEnv


def test_register_gym_spec_conversion_for_custom_spaces():
    from rl_envs import Bounded, Unbounded, register_gym_spec_conversion

    class Parent(gym.spaces.Box):
        pass

    class Child(Parent):
        pass

    class Unknown(gym.spaces.Space):
        pass

    seen = {}

    @register_gym_spec_conversion(Child)  # registered before its parent: the MRO decides
    def _child(space, **kwargs):
        seen["child"] = kwargs
        return Unbounded(space.shape, dtype=torch.float32, device=kwargs["device"])

    @register_gym_spec_conversion(Parent)
    def _parent(space, **kwargs):
        return Bounded(-5.0, 5.0, shape=space.shape, device=kwargs["device"])

    class Env(gym.Env):
        def __init__(self, space):
            self.observation_space = space
            self.action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, dtype=np.float32), {}

        def step(self, action):
            return np.ones(2, dtype=np.float32), 1.0, False, False, {}

    child = GymWrapper(Env(Child(-1, 1, (2,), dtype=np.float32)))
    assert type(child.observation_spec["observation"]).__name__ == "UnboundedContinuous"
    assert seen["child"]["action"] is False and "categorical_action_encoding" in seen["child"]
    assert child.rollout(3)["next", "observation"].shape == (3, 2)
    parent = GymWrapper(Env(Parent(-1, 1, (2,), dtype=np.float32)))
    assert parent.observation_spec["observation"].space.high.max().item() == 5.0
    with pytest.raises(TypeError, match="register_gym_spec_conversion"):
        GymWrapper(Env(Unknown()))


@pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")  # EnvBase's probe, first
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_box_action_raises_before_the_gym_env_steps(bad):
    env = GymEnv("Pendulum-v1")
    td = env.reset()
    state = np.array(env._env.unwrapped.state)
    with pytest.raises(ValueError, match=r"expected a finite action for Box.*NaN or inf"):
        env.step(td.set("action", torch.full((1,), bad)))
    np.testing.assert_array_equal(env._env.unwrapped.state, state)  # not stepped


@pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")
def test_action_rejected_by_a_gym_assert_names_the_space():
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    td = env.reset()
    with pytest.raises(ValueError, match=r"rejected the action 7.*action space Discrete\(2\)"):
        env.step(td.set("action", torch.tensor(7)))


def test_gym_env_raising_in_step_propagates_with_the_env_named():
    class Boom(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,))
        action_space = gym.spaces.Box(-1.0, 1.0, (1,))

        def reset(self, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            raise RuntimeError("physics exploded")

    env = GymWrapper(Boom())
    td = env.reset()
    with pytest.raises(RuntimeError, match="physics exploded") as info:
        env.step(env.rand_action(td))
    if sys.version_info >= (3, 11):
        assert "GymWrapper" in "".join(info.value.__notes__)
