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
