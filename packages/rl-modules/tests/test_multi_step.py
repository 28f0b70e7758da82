"""MultiStepActorWrapper: which action of which chunk runs at each step, and when it re-plans."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_modules import MultiStepActorWrapper


def planner(n_steps: int, calls: list[int], out_key="action") -> TensorDictModule:
    """Chunk k (1-based call count) holds k + t / 10 at step t, for the envs it is run on."""

    def plan(obs: torch.Tensor) -> torch.Tensor:
        calls.append(obs.shape[0])
        t = torch.arange(n_steps, dtype=torch.float32).view(1, n_steps, 1) / 10
        return torch.full((obs.shape[0], n_steps, 1), float(len(calls))) + t

    return TensorDictModule(plan, in_keys=["observation"], out_keys=[out_key])


def fresh(batch: int = 2) -> TensorDict:
    return TensorDict(
        observation=torch.zeros(batch, 1),
        is_init=torch.ones(batch, 1, dtype=torch.bool),
        batch_size=[batch],
    )


@pytest.mark.parametrize("interval", [1, 2, 3, None])
def test_actions_follow_the_chunk_and_replan_every_interval(interval):
    calls = []
    actor = MultiStepActorWrapper(planner(3, calls), n_steps=3, replan_interval=interval)
    td, executed = fresh(), []
    for _ in range(7):
        td = actor(td.exclude("action"))
        executed.append(round(float(td["action"][0, 0]), 1))
        td["is_init"] = torch.zeros(2, 1, dtype=torch.bool)
    k = interval or 3
    assert executed == [s // k + 1 + (s % k) / 10 for s in range(7)]
    assert len(calls) == -(-7 // k)
    assert td["action_orig"].shape == (2, 3, 1)
    assert actor.out_keys == ["action_orig", "action", "counter"]


def test_a_reset_replans_only_that_env_and_runs_the_actor_on_it_alone():
    calls = []
    actor = MultiStepActorWrapper(planner(3, calls), n_steps=3)
    td = actor(fresh(3))
    td["is_init"] = torch.tensor([[False], [True], [False]])
    td = actor(td)
    assert calls == [3, 1]
    torch.testing.assert_close(td["action"][:, 0], torch.tensor([1.1, 2.0, 1.1]))


def test_vla_chunk_key_maps_to_action():
    actor = MultiStepActorWrapper(planner(2, [], out_key=("vla_action", "chunk")), n_steps=2)
    assert actor.action_keys == ["action"] and actor.cache_keys == [("vla_action", "chunk")]
    td = actor(fresh())
    assert td["action"].shape == (2, 1) and "action_orig" not in td.keys(True, True)


def test_errors():
    with pytest.raises(ValueError, match="Only a single init_key"):
        MultiStepActorWrapper(planner(2, []), n_steps=2, init_key=["is_init"])
    for bad in (0, 3):
        with pytest.raises(ValueError, match="replan_interval"):
            MultiStepActorWrapper(planner(2, []), n_steps=2, replan_interval=bad)
    actor = MultiStepActorWrapper(planner(2, []), n_steps=2)
    with pytest.raises(KeyError, match="No init key"):
        actor(fresh().exclude("is_init"))
    not_reset = fresh()
    not_reset["is_init"] = torch.zeros(2, 1, dtype=torch.bool)
    with pytest.raises(RuntimeError, match="Cannot initialize"):
        actor(not_reset)
    with pytest.raises(RuntimeError, match="time dimension"):
        MultiStepActorWrapper(planner(2, []), n_steps=3)(fresh())
    with pytest.raises(RuntimeError, match="chunk length"):
        MultiStepActorWrapper(planner(2, []), replan_interval=3)(fresh())
