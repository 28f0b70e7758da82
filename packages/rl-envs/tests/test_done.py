"""Done flags at any depth: rl_envs.done, output/input specs, nested resets in rollouts."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rl_envs import Binary, Categorical, Composite, EnvBase, Unbounded
from rl_envs.done import batch_reset_mask, done_keys_groups, reset_keys, terminated_or_truncated
from rl_envs.utils import _terminated_or_truncated


def _flag() -> Categorical:
    return Categorical(2, shape=(1,), dtype=torch.bool)


class AgentsEnv(EnvBase):
    """Two agents, done flags only under "agents" ([*B, 2, 1]); agent i is done when
    its counter reaches limit[i]. Resets record the ("agents", "_reset") they got."""

    def __init__(self, batch_size=(), limits=(2, 3)):
        super().__init__(batch_size=batch_size)
        b = self.batch_size
        self.limits = torch.tensor(limits).reshape(2, 1)
        agents = Composite(
            obs=Unbounded(shape=(*b, 2, 1)),
            done=Categorical(2, shape=(*b, 2, 1), dtype=torch.bool),
            terminated=Categorical(2, shape=(*b, 2, 1), dtype=torch.bool),
            shape=(*b, 2),
        )
        self.observation_spec = Composite(agents=agents.select("obs"), shape=b)
        self.done_spec = Composite(agents=agents.select("done", "terminated"), shape=b)
        self.full_action_spec = Composite(
            agents=Composite(action=Binary(n=1, shape=(*b, 2, 1)), shape=(*b, 2)), shape=b
        )
        self.count = torch.zeros(*b, 2, 1)
        self.resets = []

    def _reset(self, td):
        mask = None if td is None else td.get(("agents", "_reset"), None)
        self.resets.append(None if mask is None else mask.clone())
        self.count = torch.zeros_like(self.count)
        return TensorDict(agents=TensorDict(obs=self.count.clone(), batch_size=(*self.batch_size, 2)),
                          batch_size=self.batch_size)  # fmt: skip

    def _step(self, td):
        self.count = self.count + 1
        done = self.count >= self.limits
        agents = TensorDict(obs=self.count.clone(), done=done, terminated=done.clone(),
                            batch_size=(*self.batch_size, 2))  # fmt: skip
        return TensorDict(agents=agents, reward=torch.zeros(*self.batch_size, 1),
                          batch_size=self.batch_size)  # fmt: skip

    def _set_seed(self, seed):
        pass


def test_output_and_input_spec_hold_the_env_specs():
    env = AgentsEnv(batch_size=(3,))
    out, inp = env.output_spec, env.input_spec
    assert out.keys() == ["full_observation_spec", "full_reward_spec", "full_done_spec"]
    assert inp.keys() == ["full_action_spec", "full_state_spec"]
    assert out["full_done_spec"] is env.full_done_spec
    assert inp["full_action_spec"] is env.full_action_spec
    assert out.shape == (3,) and env.output_spec_unbatched.shape == ()
    assert env.input_spec_unbatched["full_action_spec", "agents", "action"].shape == (2, 1)


def test_reset_keys_and_groups_sorted_by_depth():
    spec = Composite(agents={"done": _flag(), "truncated": _flag()}, done=_flag(), stop=_flag())
    assert done_keys_groups(spec) == [
        ["done", "stop"],
        [("agents", "done"), ("agents", "truncated")],
    ]
    assert reset_keys(spec) == ["_reset", ("agents", "_reset")]
    env = AgentsEnv()
    assert env.reset_keys == [("agents", "_reset")]
    assert env.done_keys_groups == [[("agents", "done"), ("agents", "terminated")]]


def test_terminated_or_truncated_writes_one_flag_per_group():
    spec = Composite(done=_flag(), truncated=_flag(), nested={"done": _flag()})
    td = TensorDict(done=torch.tensor([False]), truncated=torch.tensor([True]),
                    nested={"done": torch.tensor([False])})  # fmt: skip
    assert _terminated_or_truncated is terminated_or_truncated
    assert terminated_or_truncated(td, spec)
    assert td["_reset"].tolist() == [True] and td["nested", "_reset"].tolist() == [False]


def test_terminated_or_truncated_root_prevails_and_cleans_up():
    spec = Composite(done=_flag(), nested={"done": _flag()})
    td = TensorDict(done=torch.tensor([False]), nested={"done": torch.tensor([True])})
    assert not terminated_or_truncated(td, spec)  # the root group has leaves: it decides
    assert td.get("_reset", None) is None and td.get(("nested", "_reset"), None) is None
    kept = td.clone()
    terminated_or_truncated(kept, spec, write_full_false=True)
    assert kept["nested", "_reset"].tolist() == [True]
    only_nested = TensorDict(nested={"done": torch.tensor([True])})
    assert terminated_or_truncated(only_nested, Composite(nested={"done": _flag()}))
    searched = TensorDict(nested={"truncated": torch.tensor([True])})
    assert terminated_or_truncated(searched, None, key=None)
    assert searched.get(("nested", "_reset"), None) is None


def test_batch_reset_mask_reduces_nested_flags():
    td = TensorDict(_reset=torch.tensor([[False], [False]]),
                    a=TensorDict(_reset=torch.tensor([[[True], [False]], [[False], [False]]]),
                                 batch_size=(2, 2)), batch_size=(2,))  # fmt: skip
    assert batch_reset_mask(td, ["_reset", ("a", "_reset")], 1).tolist() == [True, False]
    assert batch_reset_mask(td, [("b", "_reset")], 1) is None


def test_rollout_of_env_without_root_done():
    env = AgentsEnv(batch_size=(2,), limits=(2, 3))
    td = env.rollout(5)  # stops at the first done of any agent
    assert td.batch_size == (2, 2)
    assert td["next", "agents", "done"][:, -1].any()
    env.resets.clear()
    td = env.rollout(7, break_when_any_done=False)
    assert td.batch_size == (2, 7)
    # counts 1, 2 (done: reset), 1, 2 (done: reset), ...: agent 0 reaches 2 and resets
    assert td["next", "agents", "obs"][0, :, 0, 0].tolist() == [1, 2, 1, 2, 1, 2, 1]
    masks = [m for m in env.resets if m is not None]
    assert masks and all(m.shape == (2, 2, 1) for m in masks)
    assert td.get("_reset", None) is None and ("agents", "_reset") not in td.keys(True)


def test_step_and_maybe_reset_with_nested_done():
    env = AgentsEnv(limits=(1, 5))
    td, root = env.step_and_maybe_reset(env.rand_action(env.reset()))
    assert td["next", "agents", "done"].tolist() == [[True], [False]]
    assert root["agents", "obs"].tolist() == [[0.0], [0.0]]  # reset
    assert ("agents", "_reset") not in root.keys(True)
    assert env.resets[-1].tolist() == [[True], [False]]


def test_break_when_all_done_freezes_on_nested_done():
    env = AgentsEnv(batch_size=(2,), limits=(2, 9))
    td = env.rollout(4, break_when_all_done=True)
    assert td.batch_size == (2, 2)
    assert td["next", "agents", "done"][:, -1, 0].all()
