"""The root a collector carries into the next batch follows docs/contract.md's ``step_mdp``.

A policy that writes an extra root entry (here a step counter it reads back on the next
call) must see it carried across steps *and* across batch boundaries, whether the batch
was filled by the env's rollout (``use_env_rollout=True``) or by the collector's own
step loop (``use_env_rollout=False``), and whether the env offers
``step_and_maybe_reset`` or the collector builds the next root itself (issue #14).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tensordict import TensorDictBase
from torch import nn

from rl_collectors import Collector
from rl_envs import PendulumEnv, StepCounter, TransformedEnv


class CountingPolicy(nn.Module):
    """Writes a zero action and ``count = previous count + 1`` (0 when absent)."""

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        previous = td.get("count", None)
        count = torch.zeros(*td.batch_size, 1) if previous is None else previous + 1
        td.set("count", count)
        td.set("action", torch.zeros(*td.batch_size, 1))
        return td


class NoStepAndMaybeReset:
    """An env honouring the contract without ``step_and_maybe_reset`` or ``rollout``."""

    def __init__(self, env: Any) -> None:
        self._env = env
        self.batch_size = env.batch_size
        self.action_spec = env.action_spec
        self.reward_keys = env.reward_keys
        self.action_keys = env.action_keys

    def reset(self, td: TensorDictBase | None = None) -> TensorDictBase:
        return self._env.reset(td)

    def step(self, td: TensorDictBase) -> TensorDictBase:
        return self._env.step(td)


def _env(wrapped: bool) -> Any:
    env = TransformedEnv(PendulumEnv(batch_size=[2]), StepCounter(max_steps=50))
    env.set_seed(0)
    return NoStepAndMaybeReset(env) if wrapped else env


@pytest.mark.parametrize("use_env_rollout,wrapped", [(True, False), (False, False), (False, True)])
def test_policy_root_entry_is_carried_into_the_next_batch(
    use_env_rollout: bool, wrapped: bool
) -> None:
    collector = Collector(
        _env(wrapped),
        CountingPolicy(),
        frames_per_batch=10,
        total_frames=30,
        use_env_rollout=use_env_rollout,
    )
    batches = list(collector)
    assert collector.last_timings.fused == (use_env_rollout and not wrapped)
    carried = collector._root
    assert set(carried.keys(True, True)) == {
        "observation",
        "done",
        "terminated",
        "truncated",
        "step_count",
        "count",
    }, "the carried root: next's entries, reward and action left out, 'count' kept"
    counts = torch.cat([b.get("count") for b in batches], dim=1).squeeze(-1)
    # No episode ends in 15 steps (max_steps=50): the counter runs on across batches.
    expected = torch.arange(15, dtype=counts.dtype).expand(2, 15)
    assert torch.equal(counts, expected)
    assert torch.equal(carried.get("count").squeeze(-1), torch.full((2,), 14.0))


# ------------------------------------------------------------ the two step_mdp copies
def _transitions() -> dict[str, tuple[TensorDictBase, list[Any], list[Any]]]:
    """Transitions (with their reward and action keys) covering the contract's cases."""
    from tensordict import TensorDict

    z = torch.zeros
    flat = TensorDict(
        {
            "observation": z(2, 3),
            "action": z(2, 1),
            "count": z(2, 1),  # a policy's root entry: kept
            "state": z(2, 4),  # also under "next": next wins
            "next": {"observation": torch.ones(2, 3), "reward": z(2, 1), "state": torch.ones(2, 4)},
        },
        [2],
    )
    nested = TensorDict(
        {
            "agents": {"observation": z(2, 3), "action": z(2, 1), "hidden": z(2, 5)},
            "done": torch.zeros(2, 1, dtype=torch.bool),
            "next": {
                "agents": {"observation": torch.ones(2, 3), "reward": z(2, 1)},
                "done": torch.ones(2, 1, dtype=torch.bool),
            },
        },
        [2],
    )
    sub_td = TensorDict(
        {
            "observation": z(3),
            "action": z(1),
            "policy": {"h": z(2), "c": z(2)},  # a sub-TensorDict at the root
            "next": {"observation": torch.ones(3), "reward": z(1), "policy": {"h": torch.ones(2)}},
        },
        [],
    )
    return {
        "flat": (flat, ["reward"], ["action"]),
        "nested_keys": (nested, [("agents", "reward")], [("agents", "action")]),
        "sub_tensordict": (sub_td, ["reward"], ["action"]),
    }


@pytest.mark.parametrize("case", ["flat", "nested_keys", "sub_tensordict"])
def test_collectors_step_mdp_follows_rl_envs_step_mdp(case: str) -> None:
    from rl_collectors._env_step import step_mdp as collectors_step_mdp
    from rl_envs import step_mdp as envs_step_mdp

    td, rewards, actions = _transitions()[case]
    ours = collectors_step_mdp(td.clone(False), rewards, actions)
    ref = envs_step_mdp(td.clone(False), reward_keys=rewards, action_keys=actions)
    assert set(ours.keys(True, True)) == set(ref.keys(True, True))
    for key in ref.keys(True, True):
        assert torch.equal(ours.get(key), ref.get(key)), key
    # the contract, spelled out independently of both implementations
    expected = {k for k in td.get("next").keys(True, True) if k not in rewards}
    nested_next = {k if isinstance(k, tuple) else (k,) for k in expected}
    for key in td.exclude("next", *rewards, *actions).keys(True, True):
        if (key if isinstance(key, tuple) else (key,)) not in nested_next:
            expected.add(key)
    assert set(ref.keys(True, True)) == expected


def _gym_pendulum() -> Any:
    from rl_envs import GymEnv

    env = GymEnv("Pendulum-v1", max_episode_steps=12)  # episodes end inside the batches
    env.set_seed(0)
    return env


@pytest.mark.parametrize("make_env", [_gym_pendulum, lambda: _env(False)], ids=["gym", "pendulum"])
def test_both_collector_paths_carry_the_same_root(make_env: Any) -> None:
    """use_env_rollout=True (env.rollout, e.g. the gym backend) and False (the step loop)
    give the same batches and carry the same root, the policy's "count" included."""
    results = []
    for use_env_rollout in (True, False):
        torch.manual_seed(0)
        collector = Collector(
            make_env(),
            CountingPolicy(),
            frames_per_batch=10,
            total_frames=30,
            use_env_rollout=use_env_rollout,
        )
        batches = list(collector)
        assert collector.last_timings.fused == use_env_rollout
        results.append((batches, collector._root))
    (fused, fused_root), (stepped, stepped_root) = results
    assert set(fused_root.keys(True, True)) == set(stepped_root.keys(True, True))
    assert fused_root.get("count", None) is not None
    for key in stepped_root.keys(True, True):
        assert torch.equal(fused_root.get(key), stepped_root.get(key)), key
    for a, b in zip(fused, stepped, strict=True):
        assert set(a.keys(True, True)) == set(b.keys(True, True))
        for key in b.keys(True, True):
            assert torch.equal(a.get(key), b.get(key)), key
