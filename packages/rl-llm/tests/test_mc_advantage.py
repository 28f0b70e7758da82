"""MCAdvantage's grouping, dynamic sampling, candidate selection and counters (TorchRL's semantics)."""

from __future__ import annotations

import multiprocessing

import pytest
import torch
from tensordict import NonTensorData, TensorDict, lazy_stack

from rl_llm import MCAdvantage, MCAdvantageSelector


def _traj(group: int, rewards: list[float]) -> TensorDict:
    n = len(rewards)
    return TensorDict(
        {
            "group_id": torch.full((n,), group),
            ("next", "reward"): torch.tensor(rewards).reshape(n, 1),
            ("next", "done"): (torch.arange(n) == n - 1).reshape(n, 1),
        },
        batch_size=[n],
    )


def test_incomplete_groups_return_none_and_groups_complete_independently():
    mc = MCAdvantage(grpo_size=2, prompt_key="group_id", trajectory_return="sum")
    assert mc.inv(_traj(0, [1.0, 0.0])) is None
    assert mc.inv(_traj(1, [0.0])) is None
    out = mc.inv(_traj(0, [0.0, 0.0]))
    assert out.shape == (4,) and (out["group_id"] == 0).all()
    assert mc.queued_groups == 1 and mc.max_queued_trajectories_per_group == 1


def test_per_step_default_normalises_every_reward_of_the_group():
    mc = MCAdvantage(grpo_size=2, prompt_key="group_id")
    assert mc.trajectory_return is None
    assert mc.inv(_traj(0, [1.0, 2.0])) is None
    out = mc.inv(_traj(0, [3.0]))
    values = torch.tensor([1.0, 2.0, 3.0])
    expected = (values - values.mean()) / values.std()
    torch.testing.assert_close(out["advantage"].flatten(), expected)


def test_per_step_with_ragged_rewards_across_steps():
    def traj(lengths):
        steps = [
            TensorDict(
                {
                    "query": NonTensorData("p"),
                    ("next", "reward"): torch.ones(n, 1) * n,
                    ("next", "done"): torch.tensor([i == len(lengths) - 1]),
                }
            )
            for i, n in enumerate(lengths)
        ]
        return lazy_stack(steps)

    mc = MCAdvantage(grpo_size=2)
    assert mc.inv(traj([2, 3])) is None
    out = mc.inv(traj([1]))
    assert out.shape == (3,)
    values = torch.tensor([2.0, 2, 3, 3, 3, 1])
    assert [step["advantage"].shape for step in out.unbind(0)] == [(2, 1), (3, 1), (1, 1)]
    got = torch.cat([step["advantage"].flatten() for step in out.unbind(0)])
    torch.testing.assert_close(got, (values - values.mean()) / values.std())


@pytest.mark.parametrize("agg", ["sum", "max", "mean"])
def test_trajectory_return_broadcast_to_steps(agg):
    mc = MCAdvantage(grpo_size=2, prompt_key="group_id", trajectory_return=agg)
    mc.inv(_traj(0, [0.0, 2.0]))
    out = mc.inv(_traj(0, [1.0, 1.0, 1.0]))
    reduce = {"sum": torch.sum, "max": torch.max, "mean": torch.mean}[agg]
    returns = torch.stack([reduce(torch.tensor([0.0, 2.0])), reduce(torch.ones(3))])
    expected = (returns - returns.mean()) / returns.std().clamp_min(1e-6)
    torch.testing.assert_close(
        out["advantage"].flatten(), torch.cat([expected[0].expand(2), expected[1].expand(3)])
    )


def test_dynamic_sampling_drops_degenerate_groups_and_counts():
    mc = MCAdvantage(
        grpo_size=2, prompt_key="group_id", trajectory_return="sum", keep_return_bounds=(0.1, 0.9)
    )
    for group, reward in [(0, 0.0), (0, 0.0), (1, 1.0), (1, 1.0), (2, 0.0)]:
        assert mc.inv(_traj(group, [reward])) is None
    assert mc.inv(_traj(2, [1.0])) is not None
    stats = mc.get_stats()
    assert stats["completed_groups"] == 3 and stats["written_groups"] == 1
    assert stats["dropped_groups"] == 2 and stats["queued_groups"] == 0
    assert stats["successful_trajectories"] == 3 and stats["trajectory_return_max"] == 1.0
    mc.reset_stats()
    assert mc.completed_groups == 0 and mc.completed_trajectories == 0


def test_oversampling_rescues_a_group_and_drops_when_full():
    mc = MCAdvantage(
        grpo_size=2,
        prompt_key="group_id",
        trajectory_return="sum",
        keep_return_bounds=(0.1, 0.9),
        candidate_group_size=3,
    )
    assert mc.inv(_traj(0, [0.0])) is None
    assert mc.inv(_traj(0, [0.0])) is None  # not useful yet: keeps collecting
    out = mc.inv(_traj(0, [1.0]))
    assert out.shape == (2,) and sorted(out["next", "reward"].flatten().tolist()) == [0.0, 1.0]
    assert (mc.rescued_groups, mc.selected_trajectories, mc.unselected_trajectories) == (1, 2, 1)
    for _ in range(3):
        assert mc.inv(_traj(1, [0.0])) is None
    assert (mc.dropped_groups, mc.queued_groups) == (1, 0)


def test_selector_strategies_and_validation():
    returns = TensorDict({"return": torch.tensor([0.0, 0.0, 0.0, 1.0])}, [4])
    assert MCAdvantageSelector().select(returns, group_size=2, keep_return_bounds=(0.1, 0.9)) == [
        0,
        3,
    ]
    assert (
        MCAdvantageSelector("first").select(returns, group_size=2, keep_return_bounds=(0.1, 0.9))
        is None
    )
    assert MCAdvantageSelector("uniform").select(returns, group_size=2) == [0, 3]
    # greedy fallback when the exact search is capped
    capped = MCAdvantageSelector(max_combinations=1)
    picked = capped.select(returns, group_size=2, keep_return_bounds=(0.1, 0.9))
    assert picked is not None and 3 in picked
    with pytest.raises(ValueError, match="strategy must be one of"):
        MCAdvantageSelector("best")


def test_constructor_validation():
    with pytest.raises(ValueError, match="trajectory_return must be one of"):
        MCAdvantage(grpo_size=2, trajectory_return="prod")
    with pytest.raises(ValueError, match="dynamic sampling"):
        MCAdvantage(grpo_size=2, keep_return_bounds=(0.1, 0.9))
    with pytest.raises(ValueError, match="increasing"):
        MCAdvantage(grpo_size=2, trajectory_return="sum", keep_return_bounds=(0.9, 0.1))
    with pytest.raises(ValueError, match="candidate_group_size > grpo_size"):
        MCAdvantage(grpo_size=2, candidate_group_size=4)
    with pytest.raises(ValueError, match="candidate_selection_min_size"):
        MCAdvantage(
            grpo_size=2,
            trajectory_return="sum",
            candidate_group_size=4,
            candidate_selection_min_size=5,
        )


def _write_from_child(mc, reward, queue):
    out = mc.inv(_traj(0, [reward]))
    queue.put(None if out is None else out["advantage"].flatten().tolist())


def test_share_memory_completes_groups_across_processes():
    mc = MCAdvantage(grpo_size=2, prompt_key="group_id", trajectory_return="sum")
    assert mc.inv(_traj(0, [0.0])) is None
    assert mc.share_memory_() is mc and mc.is_shared
    assert mc.queued_trajectories == 1
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_write_from_child, args=(mc, 1.0, queue))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    torch.testing.assert_close(torch.tensor(queue.get(timeout=5)).abs(), torch.full((2,), 2**-0.5))
    assert (mc.queued_groups, mc.written_groups, mc.completed_trajectories) == (0, 1, 2)
