"""PettingZooEnv / PettingZooWrapper: parallel (MPE) and AEC (tic-tac-toe) envs, groups,
done flags, action masks, agents that leave mid-episode, errors."""

from __future__ import annotations

import functools
import io
from typing import ClassVar

import numpy as np
import pytest
import torch

pettingzoo = pytest.importorskip("pettingzoo")
gymnasium = pytest.importorskip("gymnasium")
simple_spread_v3 = pytest.importorskip("mpe2.simple_spread_v3")
simple_adversary_v3 = pytest.importorskip("mpe2.simple_adversary_v3")

from rl_envs import check_env_specs, step_mdp  # noqa: E402
from rl_envs.libs.marl import MarlGroupMapType  # noqa: E402
from rl_envs.libs.pettingzoo import PettingZooEnv, PettingZooWrapper  # noqa: E402

N = 3


class Leaving(pettingzoo.ParallelEnv):
    """Agent ``i`` ends at step ``ends[i]`` (terminated, or truncated if ``truncs[i]``).

    Observation: ``[step, i]``; reward ``i + 1`` per step; info ``{"score": step}`` and,
    with ``masked=True``, ``info["action_mask"]`` allowing only action ``step % 3``."""

    metadata: ClassVar[dict] = {"name": "leaving_v0"}

    def __init__(self, ends=(1, 2, 3), truncs=(False, False, False), masked=False):
        self.possible_agents = [f"walker_{i}" for i in range(len(ends))]
        self.ends, self.truncs, self.masked = ends, truncs, masked
        self.seen_actions = []

    @functools.cache  # noqa: B019 (PettingZoo's documented pattern)
    def observation_space(self, agent):
        return gymnasium.spaces.Box(-10.0, 10.0, (2,), np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent):
        return gymnasium.spaces.Discrete(3)

    def _info(self):
        info = {"score": float(self.t)}
        if self.masked:
            mask = np.zeros(3, dtype=np.int8)
            mask[self.t % 3] = 1
            info["action_mask"] = mask
        return info

    def _obs(self, a):
        return np.array([self.t, self.possible_agents.index(a)], dtype=np.float32)

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: self._obs(a) for a in self.agents}, {a: self._info() for a in self.agents}

    def step(self, actions):
        self.seen_actions.append(dict(actions))
        self.t += 1
        obs = {a: self._obs(a) for a in self.agents}
        rew = {a: float(self.possible_agents.index(a) + 1) for a in self.agents}
        term, trunc = {}, {}
        for a in self.agents:
            i = self.possible_agents.index(a)
            ended = self.t >= self.ends[i]
            term[a] = ended and not self.truncs[i]
            trunc[a] = ended and self.truncs[i]
        infos = {a: self._info() for a in self.agents}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rew, term, trunc, infos


def _spread(**kw):
    kw.setdefault("group_map", MarlGroupMapType.ALL_IN_ONE_GROUP)
    kw.setdefault("max_cycles", 4)
    return PettingZooEnv("simple_spread_v3", parallel=True, N=N, seed=0, **kw)


# ----------------------------------------------------------------------- parallel (MPE)
def test_spread_specs_and_check():
    # TorchRL's default for parallel envs: "<name>_<int>" agents grouped by <name>
    assert _spread(group_map=None).group_map == {"agent": ["agent_0", "agent_1", "agent_2"]}
    env = _spread()
    assert env.batch_size == ()
    assert env.group_map == {"agents": ["agent_0", "agent_1", "agent_2"]}
    assert env.full_observation_spec["agents", "observation"].shape == (N, 18)
    assert env.full_action_spec["agents", "action"].shape == (N,)
    assert env.full_reward_spec["agents", "reward"].shape == (N, 1)
    assert env.full_done_spec["agents", "terminated"].shape == (N, 1)
    assert env.full_done_spec["done"].shape == (1,)
    check_env_specs(env, break_when_any_done="both")
    check_env_specs(_spread(categorical_actions=False, return_state=True))


def test_spread_matches_raw_parallel_env():
    raw = simple_spread_v3.parallel_env(N=N, max_cycles=4)
    obs, _ = raw.reset(seed=5)
    env = _spread()
    td = env.reset(seed=5)  # reset kwargs go to PettingZoo's reset
    want = torch.stack([torch.as_tensor(obs[a]) for a in raw.possible_agents])
    assert torch.equal(td["agents", "observation"], want)
    torch.manual_seed(0)
    for t in range(4):
        a = torch.randint(0, 5, (N,))
        obs, rew, _, trunc, _ = raw.step({f"agent_{i}": int(a[i]) for i in range(N)})
        td["agents", "action"] = a
        td = env.step(td)
        nxt = td["next"]
        agents = raw.possible_agents
        assert torch.equal(
            nxt["agents", "observation"], torch.stack([torch.as_tensor(obs[x]) for x in agents])
        )
        want_rew = torch.tensor([[rew[x]] for x in agents], dtype=torch.float32)
        assert torch.equal(nxt["agents", "reward"], want_rew)
        want_trunc = torch.tensor([[trunc[x]] for x in agents])
        assert torch.equal(nxt["agents", "truncated"], want_trunc)
        assert not nxt["agents", "terminated"].any()
        assert bool(nxt["truncated"]) == (t == 3) and bool(nxt["done"]) == (t == 3)
        assert not nxt["terminated"].any()
        td = nxt.exclude(("agents", "reward"))


def test_spread_one_hot_actions_equal_categorical():
    torch.manual_seed(0)
    acts = [torch.randint(0, 5, (N,)) for _ in range(3)]
    out = []
    for cat in (True, False):
        env = _spread(categorical_actions=cat)
        td = env.reset(seed=1)
        for a in acts:
            td["agents", "action"] = a if cat else torch.nn.functional.one_hot(a, 5)
            td = env.step(td)["next"].exclude(("agents", "reward"))
        out.append(td["agents", "observation"])
    assert torch.equal(out[0], out[1])


def test_seed_is_deterministic():
    a, b = _spread(), _spread()
    a.set_seed(7)
    b.set_seed(7)
    assert torch.equal(a.reset()["agents", "observation"], b.reset()["agents", "observation"])


def test_return_state():
    env = _spread(return_state=True)
    td = env.reset(seed=0)
    raw = simple_spread_v3.parallel_env(N=N, max_cycles=4)
    raw.reset(seed=0)
    assert td["state"].shape == (54,)
    assert torch.equal(td["state"], torch.as_tensor(raw.state()))


def test_group_maps():
    per_agent = _spread(group_map=MarlGroupMapType.ONE_GROUP_PER_AGENT)
    assert list(per_agent.group_map) == ["agent_0", "agent_1", "agent_2"]
    assert per_agent.full_observation_spec["agent_1", "observation"].shape == (1, 18)
    check_env_specs(per_agent)
    split = _spread(group_map={"lead": ["agent_2"], "rest": ["agent_0", "agent_1"]})
    td = split.reset(seed=3)
    ref = _spread().reset(seed=3)["agents", "observation"]
    assert torch.equal(td["lead", "observation"][0], ref[2])
    assert torch.equal(td["rest", "observation"], ref[:2])
    check_env_specs(split)


def test_default_group_map_by_prefix_and_heterogeneous_group():
    env = PettingZooWrapper(simple_adversary_v3.parallel_env(N=2, max_cycles=3), seed=0)
    assert env.group_map == {"adversary": ["adversary_0"], "agent": ["agent_0", "agent_1"]}
    check_env_specs(env)
    with pytest.raises(ValueError, match="different observation spaces"):
        PettingZooWrapper(
            simple_adversary_v3.parallel_env(N=2), group_map=MarlGroupMapType.ALL_IN_ONE_GROUP
        )


@pytest.mark.parametrize(
    ("group_map", "match"),
    [
        ({"agents": ["agent_0", "agent_1", "agent_9"]}, r"unknown agents \['agent_9'\]"),
        ({"agents": ["agent_0", "agent_1"]}, r"agents \['agent_2'\] are in no group"),
    ],
)
def test_bad_group_map(group_map, match):
    with pytest.raises(ValueError, match=match):
        _spread(group_map=group_map)


def test_wrong_agent_count_action():
    env = _spread()
    td = env.reset()
    td["agents"] = td["agents"][:2]
    td["agents", "action"] = torch.zeros(2, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"\('agents', 'action'\).*expected \(3,\)"):
        env.step(td)


def test_constructor_errors():
    with pytest.raises(TypeError, match=r"needs a pettingzoo\.ParallelEnv or pettingzoo\.AECEnv"):
        PettingZooWrapper(object())
    with pytest.raises(ValueError, match="AEC env needs use_mask=True"):
        PettingZooEnv("tictactoe_v3", parallel=False)
    with pytest.raises(ValueError, match="has no parallel version"):
        PettingZooEnv("tictactoe_v3", parallel=True, use_mask=True)
    with pytest.raises(ValueError, match="unknown task 'not_a_task_v1'"):
        PettingZooEnv("not_a_task_v1", parallel=True)
    assert "mpe/simple_spread_v3" in PettingZooEnv.available_envs
    assert "classic/tictactoe-v3" in PettingZooEnv.available_envs


# ---------------------------------------------------------------------- AEC (tic-tac-toe)
def _ttt(**kw):
    return PettingZooEnv("tictactoe_v3", parallel=False, use_mask=True, seed=0, **kw)


@pytest.mark.parametrize("categorical", [True, False])
def test_tictactoe_specs_and_masks(categorical):
    env = _ttt(categorical_actions=categorical)
    assert env.group_map == {"player_1": ["player_1"], "player_2": ["player_2"]}
    check_env_specs(env)
    torch.manual_seed(0)
    td = env.rollout(9)  # a game lasts at most 9 moves
    assert td["next", "done"][-1].all() and not td["next", "done"][:-1].any()
    # players alternate, starting with player_1
    p1 = td["player_1", "mask"].squeeze(-1)
    assert torch.equal(p1, torch.arange(td.shape[0]) % 2 == 0)
    assert torch.equal(td["player_2", "mask"].squeeze(-1), ~p1)
    # random actions follow the acting player's action mask: no illegal move
    act = td["player_1", "action"].squeeze(-1)
    if not categorical:
        act = act.argmax(-1)
    for t in range(0, td.shape[0], 2):
        assert td["player_1", "action_mask"][t, 0, act[t]]
    final = td["next", "player_1", "reward"][-1] + td["next", "player_2", "reward"][-1]
    assert final.item() == 0.0  # zero-sum: +1/-1 or a draw 0/0
    assert td["next", "player_1", "terminated"][-1].all()


def test_tictactoe_matches_raw_aec():
    raw = pettingzoo.make("aec", "classic/tictactoe-v3")
    raw.reset(seed=0)
    env = _ttt()
    td = env.reset()
    moves = [4, 0, 8, 2, 1, 7]  # player_1 then player_2, ...; no win before the end
    for t, m in enumerate(moves):
        player = raw.agent_selection
        want_mask = torch.as_tensor(raw.observe(player)["action_mask"]).bool()
        assert torch.equal(td[player, "action_mask"][0], want_mask)
        assert td[player, "mask"].item()
        raw.step(m)
        td[player, "action"] = torch.tensor([m])
        other = "player_2" if player == "player_1" else "player_1"
        td[other, "action"] = torch.tensor([0])  # ignored: not its turn
        td = env.step(td)
        for p in ("player_1", "player_2"):
            want = torch.as_tensor(raw.observe(p)["observation"])
            assert torch.equal(td["next", p, "observation", "observation"][0], want), (t, p)
        td = td["next"].exclude(("player_1", "reward"), ("player_2", "reward"))


def test_illegal_move_is_passed_to_pettingzoo():
    env = _ttt()
    td = env.reset()
    td["player_1", "action"] = torch.tensor([4])
    td["player_2", "action"] = torch.tensor([0])
    td = env.step(td)["next"].exclude(("player_1", "reward"), ("player_2", "reward"))
    assert not td["player_2", "action_mask"][0, 4]
    td["player_2", "action"] = torch.tensor([4])  # occupied: PettingZoo ends the game
    td["player_1", "action"] = torch.tensor([0])
    nxt = env.step(td)["next"]  # PettingZoo logs "Illegal move made"
    assert nxt["done"].all()
    assert nxt["player_2", "reward"].item() == -1.0


# ---------------------------------------------------------- agents that leave mid-episode
def test_leaving_agents_with_mask():
    env = PettingZooWrapper(Leaving(), use_mask=True, done_on_any=False)
    assert env.group_map == {"walker": ["walker_0", "walker_1", "walker_2"]}
    check_env_specs(env)
    env.env.seen_actions.clear()
    td = env.rollout(5)
    assert td.shape == (3,)
    mask = td["next", "walker", "mask"]
    assert torch.equal(mask, torch.tensor([[0, 1, 1], [0, 0, 1], [0, 0, 0]]).bool())
    done = td["next", "walker", "done"].squeeze(-1)
    assert torch.equal(done, torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]]).bool())
    assert torch.equal(td["next", "done"].squeeze(-1), torch.tensor([False, False, True]))
    # agents gone before this step: zero observation and reward
    obs = td["next", "walker", "observation"]
    assert torch.equal(obs[1, 0], torch.zeros(2)) and torch.equal(obs[2, :2], torch.zeros(2, 2))
    assert torch.equal(obs[2, 2], torch.tensor([3.0, 2.0]))
    rew = td["next", "walker", "reward"].squeeze(-1)
    assert torch.equal(rew, torch.tensor([[1.0, 2, 3], [0, 2, 3], [0, 0, 3]]))
    # only live agents' actions reach the env
    assert [sorted(a) for a in env.env.seen_actions] == [
        ["walker_0", "walker_1", "walker_2"],
        ["walker_1", "walker_2"],
        ["walker_2"],
    ]
    score = torch.tensor([[1.0, 1, 1], [0, 2, 2], [0, 0, 3]])  # zeros for gone agents
    assert torch.equal(td["next", "walker", "info", "score"], score)


def test_leaving_agents_done_on_any_default():
    env = PettingZooWrapper(Leaving(), use_mask=True)
    td = env.rollout(5)
    assert td.shape == (1,) and td["next", "done"].all() and td["next", "terminated"].all()


def test_leaving_agent_without_mask_is_an_error():
    env = PettingZooWrapper(Leaving(), done_on_any=False)
    td = env.rollout(1)
    td = td[-1]["next"].exclude(("walker", "reward"))
    td["walker", "action"] = torch.zeros(3, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"'walker_0' has left the episode.*use_mask=True"):
        env.step(td)


def test_all_done_mixing_terminated_and_truncated():
    env = PettingZooWrapper(
        Leaving(ends=(1, 2), truncs=(False, True)), use_mask=True, done_on_any=False
    )
    td = env.rollout(5)
    last = td["next"][-1]
    assert last["done"].all() and last["truncated"].all() and not last["terminated"].any()
    assert torch.equal(last["walker", "terminated"].squeeze(-1), torch.tensor([True, False]))
    assert torch.equal(last["walker", "truncated"].squeeze(-1), torch.tensor([False, True]))
    check_env_specs(env)


def test_action_mask_from_info():
    env = PettingZooWrapper(Leaving(ends=(4, 4, 4), masked=True), use_mask=True)
    td = env.reset()
    assert torch.equal(td["walker", "action_mask"][0], torch.tensor([True, False, False]))
    assert ("walker", "info", "action_mask") not in td.keys(True, True)
    torch.manual_seed(0)
    out = env.rollout(4)
    t = torch.arange(4)
    assert torch.equal(out["walker", "action"], (t % 3).unsqueeze(-1).expand(4, 3))
    check_env_specs(env)


@pytest.mark.parametrize("which", ["spread", "tictactoe"])
def test_get_set_state_resume_is_bit_identical(which):
    def make():
        return _spread() if which == "spread" else _ttt()  # 12 steps cross resets

    env = make()
    keys = {"reward_keys": env.reward_keys, "action_keys": env.action_keys}
    torch.manual_seed(0)
    root = step_mdp(env.rollout(3, break_when_any_done=False)[..., -1], **keys)
    buf = io.BytesIO()
    torch.save({"env": env.get_state(), "root": root}, buf)
    torch.manual_seed(1)
    ref = env.rollout(12, auto_reset=False, tensordict=root, break_when_any_done=False)
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=False)
    fresh = make()
    fresh.rollout(2)  # the fresh env's own episode is replaced by the saved one
    fresh.set_state(ckpt["env"])
    torch.manual_seed(1)
    got = fresh.rollout(12, auto_reset=False, tensordict=ckpt["root"], break_when_any_done=False)
    for key in ref.keys(True, True):
        assert torch.equal(ref[key], got[key]), key


def test_set_state_from_other_agents_is_refused():
    with pytest.raises(ValueError, match="this one has"):
        _spread().set_state(_ttt().get_state())


# ------------------------------------------------------------------ input validation
class Blind(Leaving):
    """Leaving, but agent walker_1's observation goes missing at the first step."""

    def step(self, actions):
        obs, rew, term, trunc, infos = super().step(actions)
        obs.pop("walker_1", None)
        return obs, rew, term, trunc, infos


class Spawning(Leaving):
    """Leaving, but an agent missing from possible_agents shows up at the first step."""

    def step(self, actions):
        obs, rew, term, trunc, infos = super().step(actions)
        obs["stranger_9"] = np.zeros(2, np.float32)
        rew["stranger_9"] = 1.0
        return obs, rew, term, trunc, infos


def _leaving_root(env_cls, **kw):
    env = PettingZooWrapper(env_cls(ends=(5, 5, 5)), use_mask=True, **kw)
    return env, env.reset()


def test_live_agent_without_observation_raises_naming_it():
    env, td = _leaving_root(Blind)
    with pytest.raises(ValueError, match=r"agents \['walker_1'\] are live.*no observation"):
        env.step(env.rand_action(td))


def test_agent_outside_possible_agents_raises_naming_it():
    env, td = _leaving_root(Spawning)
    with pytest.raises(ValueError, match=r"\['stranger_9'\] that are not in possible_agents"):
        env.step(env.rand_action(td))


@pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")  # EnvBase's probe, first
@pytest.mark.parametrize("bad", [7, -1, 0.7])
def test_out_of_space_discrete_action_is_refused_naming_agent_and_space(bad):
    env, td = _leaving_root(Leaving)
    group = next(iter(env.group_map))
    action = torch.zeros(env.full_action_spec[group, "action"].shape, dtype=torch.float64)
    action[1] = bad
    td.set((group, "action"), action)
    with pytest.raises(ValueError, match=r"agent 'walker_1'.*Discrete\(3\).*integer indices"):
        env.step(td)
    assert env._env.seen_actions == []  # nothing reached the PettingZoo env


@pytest.mark.filterwarnings("ignore:.*outside its spec:UserWarning")
def test_invalid_one_hot_action_is_refused():
    env, td = _leaving_root(Leaving, categorical_actions=False)
    group = next(iter(env.group_map))
    action = torch.zeros(env.full_action_spec[group, "action"].shape, dtype=torch.int64)
    action[:, 0] = 1
    action[0, 1] = 1  # two ones
    td.set((group, "action"), action)
    with pytest.raises(ValueError, match=r"agent 'walker_0'.*exactly one 1"):
        env.step(td)


def test_step_before_reset_raises():
    env = PettingZooWrapper(Leaving(ends=(5, 5, 5)), use_mask=True)
    td = env.rand_action(env.fake_tensordict().exclude("next"))
    with pytest.raises(RuntimeError, match=r"PettingZooWrapper.step\(\) was called before reset"):
        env.step(td)
