"""step_mdp, check_env_specs and EnvCreator."""

from __future__ import annotations

import pickle

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from rl_envs import EnvCreator, PendulumEnv, check_env_specs, get_env_metadata, step_mdp


def transition():
    return TensorDict(
        observation=torch.zeros(2, 3),
        action=torch.ones(2, 1),
        hidden=torch.full((2, 4), 7.0),
        done=torch.zeros(2, 1, dtype=torch.bool),
        next=TensorDict(
            observation=torch.ones(2, 3),
            reward=torch.ones(2, 1),
            done=torch.ones(2, 1, dtype=torch.bool),
            batch_size=[2],
        ),
        batch_size=[2],
    )


def test_step_mdp_defaults():
    out = step_mdp(transition())
    assert set(out.keys()) == {"observation", "done", "hidden"}
    assert torch.equal(out["observation"], torch.ones(2, 3))
    assert out["done"].all()  # the next flags win over the root ones
    assert torch.equal(out["hidden"], torch.full((2, 4), 7.0))


@pytest.mark.parametrize(
    ("kwargs", "keys"),
    [
        ({"keep_other": False}, {"observation", "done"}),
        ({"exclude_reward": False}, {"observation", "done", "hidden", "reward"}),
        ({"exclude_done": True}, {"observation", "hidden"}),
        ({"exclude_action": False}, {"observation", "done", "hidden", "action"}),
    ],
)
def test_step_mdp_options(kwargs, keys):
    assert set(step_mdp(transition(), **kwargs).keys()) == keys


def test_step_mdp_into_next_tensordict():
    dest = TensorDict(batch_size=[2])
    assert step_mdp(transition(), next_tensordict=dest) is dest
    assert "observation" in dest


class BadEnv(PendulumEnv):
    def _step(self, td):
        out = super()._step(td)
        out.set("undeclared", torch.zeros(1))
        return out


@pytest.mark.parametrize("action_key", ["action", ("agents", "action")])
def test_step_mdp_next_root_does_not_alias_next_subtds(action_key):
    td = TensorDict(
        agents=TensorDict(obs=torch.zeros(2, 1), batch_size=(2,)),
        next=TensorDict(agents=TensorDict(obs=torch.ones(2, 1), batch_size=(2,))),
    )
    td.set(action_key, torch.zeros(2, 1) if action_key != "action" else torch.zeros(1))
    root = step_mdp(td, action_keys=action_key)
    root.set(("agents", "action"), torch.ones(2, 1))  # e.g. the next step's policy writes
    assert root["agents", "obs"] is td["next", "agents", "obs"]  # tensors shared
    assert ("next", "agents", "action") not in td.keys(True)  # structure not shared


def test_step_mdp_drops_sub_tds_left_empty_and_keeps_their_batch_size():
    sub = TensorDict(reward=torch.ones(4, 3, 1), state=torch.ones(4, 3, 1), batch_size=(4, 3))
    td = TensorDict(data=TensorDict(action=torch.zeros(4, 3, 1), batch_size=(4, 3)),
                    next=TensorDict(data=sub, batch_size=(4,)), batch_size=(4,))  # fmt: skip
    out = step_mdp(td, reward_keys=("data", "reward"), action_keys=("data", "action"))
    assert out["data"].batch_size == (4, 3)
    assert list(out.keys(True, True)) == [("data", "state")]
    only_reward = td.exclude(("next", "data", "state"))
    out = step_mdp(only_reward, reward_keys=("data", "reward"), action_keys=("data", "action"))
    assert list(out.keys()) == []  # nothing left under "data": no empty sub-TensorDict


def test_step_mdp_keep_other_false_keeps_the_actions_when_asked():
    td = TensorDict(data=TensorDict(action=torch.zeros(2, 1), batch_size=(2,)), other=torch.ones(1),
                    next=TensorDict(obs=torch.ones(1)))  # fmt: skip
    out = step_mdp(td, keep_other=False, exclude_action=False, action_keys=("data", "action"))
    assert sorted(map(str, out.keys(True, True))) == ["('data', 'action')", "obs"]
    assert out["data"].batch_size == (2,)
    assert list(step_mdp(td, keep_other=False, action_keys=("data", "action")).keys()) == ["obs"]


def test_step_mdp_of_a_heterogeneous_lazy_stack():
    tds = [
        TensorDict(obs=torch.zeros(i), action=torch.zeros(1), next=TensorDict(obs=torch.ones(i)))
        for i in (1, 2)
    ]
    out = step_mdp(LazyStackedTensorDict.lazy_stack(tds, 0))
    assert isinstance(out, LazyStackedTensorDict) and out.batch_size == (2,)
    assert [t["obs"].tolist() for t in out.tensordicts] == [[1.0], [1.0, 1.0]]
    assert all(t.get("action", None) is None for t in out.tensordicts)


def test_check_env_specs_names_undeclared_key():
    with pytest.raises(AssertionError, match=r"extra \[\('next', 'undeclared'\)\]"):
        check_env_specs(BadEnv())


class WrongDtypeEnv(PendulumEnv):
    def _step(self, td):
        out = super()._step(td)
        out.set("reward", out["reward"].double())
        return out


def test_check_env_specs_names_wrong_dtype():
    with pytest.raises(AssertionError, match=r"\('next', 'reward'\): expected dtype torch.float32"):
        check_env_specs(WrongDtypeEnv())


def test_env_creator_pickles_and_reads_specs():
    make = EnvCreator(PendulumEnv, {"batch_size": [2]})
    make = pickle.loads(pickle.dumps(make))
    env = make()
    assert env.batch_size == (2,)
    assert make.meta_data["full_action_spec"]["action"].shape == (2, 1)
    meta = make.meta_data  # TorchRL's layout: input_spec / output_spec
    assert meta.specs["input_spec", "full_action_spec", "action"].shape == (2, 1)
    assert meta.specs["output_spec", "full_observation_spec", "observation"].shape == (2, 3)
    assert meta.batch_size == (2,) and meta.device == torch.device("cpu")
    assert make(batch_size=[3]).batch_size == (3,)


def test_env_creator_pickles_lambdas_and_closures():
    # Plain pickle refuses both; TorchRL's EnvCreator carries them to workers with cloudpickle.
    size = 3
    for factory in (lambda: PendulumEnv(batch_size=[size]), _local_factory(size)):
        with pytest.raises((pickle.PicklingError, AttributeError)):
            pickle.dumps(factory)
        make = pickle.loads(pickle.dumps(EnvCreator(factory)))
        assert make().batch_size == (size,)


def _local_factory(size: int):
    def make_env():
        return PendulumEnv(batch_size=[size])

    return make_env


def test_step_mdp_moves_a_tensorclass_whole():
    from tensordict import tensorclass

    @tensorclass
    class Turns:
        role: str
        tokens: torch.Tensor

    turns = Turns(role=[["user", "assistant", "user"]] * 2, tokens=torch.ones(2, 3, 4),
                  batch_size=[2, 3])  # fmt: skip
    td = TensorDict(
        observation=torch.zeros(2, 1),
        next=TensorDict(observation=torch.ones(2, 1), turns=turns, batch_size=[2]),
        batch_size=[2],
    )
    out = step_mdp(td, action_keys="missing")
    assert out["turns"] is td["next", "turns"] and out["turns"].batch_size == (2, 3)
    assert out["turns"].role[1] == ["user", "assistant", "user"]


def test_env_creator_keyword_arguments_and_variants():
    make = EnvCreator(PendulumEnv, max_episode_steps=4)
    assert make().rollout(10).shape == (4,)
    both = EnvCreator(PendulumEnv, {"max_episode_steps": 3}, max_episode_steps=9)
    assert both.create_env_kwargs == {"max_episode_steps": 3}  # the dict wins, as in TorchRL
    meta = make.meta_data
    longer = make.make_variant(max_episode_steps=6)
    assert longer().rollout(10).shape == (6,)
    assert make().rollout(10).shape == (4,)  # the original keeps its own kwargs
    assert longer.meta_data is meta  # shared: same specs
    restored = pickle.loads(pickle.dumps(longer))
    assert restored.create_env_kwargs == {"max_episode_steps": 6}


def test_get_env_metadata_of_envs_and_creators_closes_what_it_built():
    env = PendulumEnv(batch_size=[2])
    meta = get_env_metadata(env)
    assert meta.batch_size == (2,) and not env.is_closed  # an env given is not closed
    assert meta.tensordict["next", "observation"].shape == (2, 3)
    built = []

    def make(**kwargs):
        built.append(PendulumEnv(**kwargs))
        return built[-1]

    assert get_env_metadata(make, {"batch_size": [3]}).batch_size == (3,)
    assert built[-1].is_closed

    def broken():
        env = make()
        env.fake_tensordict = lambda: (_ for _ in ()).throw(RuntimeError("no fake"))
        return env

    with pytest.raises(RuntimeError, match="no fake"):
        get_env_metadata(broken)
    assert built[-1].is_closed
    with pytest.raises(TypeError, match="takes an env or a callable"):
        get_env_metadata(3)
