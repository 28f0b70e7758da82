"""Trajectory boundaries, Trajectory views, the traj query language and ReplayBuffer.query."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict, lazy_stack

from rl_buffers import (
    DEFAULT_DONE_KEYS,
    LazyTensorStorage,
    ListStorage,
    ReplayBuffer,
    TensorDictReplayBuffer,
    Trajectory,
    filter_trajectories,
    find_start_stop_traj,
    iter_trajectories,
    traj,
    tree_iter,
)


def _runs(end: list[bool], at_capacity: bool, cursor: int | None) -> list[tuple[int, int, int]]:
    """Reference: walk the rows one by one (cyclically when full), cutting after each end."""
    steps = len(end)
    end = list(end)
    if not at_capacity:
        end[-1] = True
    elif cursor is not None:
        end[cursor] = True
    if not any(end):
        end[-1] = True
    stops = [t for t in range(steps) if end[t]]
    out = []
    for i, stop in enumerate(stops):
        start = (stops[i - 1] + 1) % steps
        out.append((start, stop, (stop - start) % steps + 1))
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("at_capacity", [True, False])
def test_find_start_stop_matches_a_row_by_row_walk(seed: int, at_capacity: bool) -> None:
    gen = torch.Generator().manual_seed(seed)
    end = torch.rand(12, generator=gen) < 0.3
    cursor = int(torch.randint(12, (1,), generator=gen)) if at_capacity else None
    start, stop, lengths = find_start_stop_traj(end=end, at_capacity=at_capacity, cursor=cursor)
    got = list(zip(start[:, 0].tolist(), stop[:, 0].tolist(), lengths.tolist(), strict=True))
    assert got == _runs(end.tolist(), at_capacity, cursor)
    assert lengths.sum() == 12


def test_find_start_stop_columns_ids_and_errors() -> None:
    ids = torch.tensor([[0, 3], [0, 3], [1, 3], [1, 4], [1, 4]])
    start, stop, lengths = find_start_stop_traj(trajectory=ids, at_capacity=False)
    assert start.tolist() == [[0, 0], [2, 0], [0, 1], [3, 1]]
    assert stop.tolist() == [[1, 0], [4, 0], [2, 1], [4, 1]]
    assert lengths.tolist() == [2, 3, 3, 2]
    # ids equal across the wrap point of a full storage: one trajectory spans it
    start, stop, _ = find_start_stop_traj(
        trajectory=torch.tensor([5, 5, 0, 0, 5]), at_capacity=True
    )
    assert start[:, 0].tolist() == [4, 2] and stop[:, 0].tolist() == [1, 3]
    with pytest.raises(TypeError, match="Exactly one"):
        find_start_stop_traj(at_capacity=True)
    with pytest.raises(RuntimeError, match="empty"):
        find_start_stop_traj(end=torch.zeros(0, dtype=torch.bool), at_capacity=False)
    with pytest.raises(RuntimeError, match="cursor must not be"):
        find_start_stop_traj(
            end=torch.zeros(3, dtype=torch.bool), at_capacity=True, cursor=range(0)
        )


def test_tree_iter_yields_leaves() -> None:
    leaves = list(tree_iter({"a": torch.zeros(1), "b": (torch.ones(1), [torch.ones(2)])}))
    assert [leaf.numel() for leaf in leaves] == [1, 1, 2]


def _data(lengths: tuple[int, ...], ids: bool = True) -> TensorDict:
    traj_ids = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    done = torch.zeros(len(traj_ids), 1, dtype=torch.bool)
    done[torch.tensor(lengths).cumsum(0) - 1] = True
    data = TensorDict(
        {"obs": torch.randn(len(traj_ids), 2), ("next", "reward"): traj_ids[:, None] + 1.0,
         ("next", "done"): done},
        [len(traj_ids)],
    )  # fmt: skip
    if ids:
        data["collector", "traj_ids"] = traj_ids
    return data


def test_trajectory_view() -> None:
    trajectory = Trajectory(_data((4,)))
    assert trajectory.length == 4 and trajectory.obs.shape == (4, 2)
    assert trajectory.reward.shape == (4, 1) and float(trajectory.total_reward) == 4.0
    assert isinstance(trajectory[1:3], Trajectory) and trajectory[1:3].length == 2
    assert trajectory["next", "done"].shape == (4, 1)
    with pytest.raises(AttributeError, match="no entry 'pixels'"):
        _ = trajectory.pixels
    with pytest.raises(ValueError, match="single batch dimension"):
        Trajectory(_data((4,)).reshape(2, 2))
    stacked = lazy_stack([trajectory, Trajectory(_data((2,)))])
    assert isinstance(stacked, Trajectory) and stacked[1].length == 2


def test_iter_trajectories_ids_flags_and_errors() -> None:
    assert [t.length for t in iter_trajectories(_data((3, 1, 2)))] == [3, 1, 2]
    with pytest.warns(UserWarning, match="end-of-episode"):
        assert [t.length for t in iter_trajectories(_data((3, 1, 2), ids=False))] == [3, 1, 2]
    with pytest.raises(KeyError, match="trajectory_key"):
        list(iter_trajectories(_data((3,)), trajectory_key="nope"))
    with pytest.raises(TypeError, match="TensorDictBase"):
        list(iter_trajectories(torch.zeros(3)))


def test_default_done_keys_each_end_a_trajectory() -> None:
    assert DEFAULT_DONE_KEYS == ("done", "truncated", "terminated")
    for key in DEFAULT_DONE_KEYS:  # any one of the flags, alone, ends a trajectory
        flags = torch.zeros(6, 1, dtype=torch.bool)
        flags[[1, 5]] = True
        data = TensorDict({("next", key): flags, "obs": torch.arange(6)}, [6])
        with pytest.warns(UserWarning):
            assert [t.length for t in iter_trajectories(data)] == [2, 4]


def test_query_language() -> None:
    data = _data((5, 3, 7))  # rewards 1, 2, 3 per step: sums 5, 6, 21
    assert [t.length for t in filter_trajectories(data, traj.reward.sum() > 5.5)] == [3, 7]
    kept = filter_trajectories(data, (traj.length >= 5) & ~(traj.reward.max() > 2))
    assert [t.length for t in kept] == [5]
    assert [t.length for t in filter_trajectories(data, (traj.reward == 2).all())] == [3]
    assert [
        t.length for t in filter_trajectories(data, traj["collector", "traj_ids"].last() == 0)
    ] == [5]
    with pytest.raises(TypeError, match="any"):
        filter_trajectories(data, traj.reward > 1)
    predicate = (traj.reward.sum() > 1) | (traj["collector", "traj_ids"] == 1).any()
    assert predicate.required_keys() == frozenset({"reward", ("collector", "traj_ids")})
    assert (traj.length > 1).required_keys() == frozenset()
    assert [t.length for t in filter_trajectories(data, lambda t: t.length == 3)] == [3]


def test_query_follows_the_wrap_point_oldest_first() -> None:
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(_data((5, 3)))
    third = _data((4,))
    third["collector", "traj_ids"].fill_(2)
    rb.extend(third)  # writes rows 8, 9, 0, 1: trajectory 0 loses its first two steps
    assert [t.length for t in rb.query()] == [3, 3, 4]
    (wrapped,) = rb.query(traj["collector", "traj_ids"].first() == 2)
    assert torch.equal(wrapped.obs, third["obs"])


def test_query_two_dim_storage_goes_env_by_env() -> None:
    ids = torch.tensor([[0, 0, 0, 1, 1, 1], [2, 2, 2, 2, 3, 3]])
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(12, ndim=2))
    rb.extend(
        TensorDict(
            {("collector", "traj_ids"): ids, ("next", "reward"): ids[..., None] + 1.0}, [2, 6]
        )
    )
    assert [t.length for t in rb.query()] == [3, 3, 4, 2]
    assert [t.length for t in rb.query(traj.reward.first() == 3.0)] == [4]


class _Scale:
    """A read transform with keys, counting its calls."""

    def __init__(self, key: tuple) -> None:
        self.in_keys = self.out_keys = [key]
        self.calls = 0

    def __call__(self, data: TensorDict) -> TensorDict:
        self.calls += 1
        data[self.in_keys[0]] = data[self.in_keys[0]] * 2
        return data


def test_query_runs_only_the_transforms_the_predicate_needs() -> None:
    obs, reward = _Scale(("obs",)), _Scale(("next", "reward"))
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(15))
    rb.append_transform(obs).append_transform(reward)
    rb.extend(_data((5, 3, 7)))
    kept = rb.query(traj.reward.sum() > 11.0)  # doubled sums 10, 12, 42
    assert [t.length for t in kept] == [3, 7] and float(kept[1].reward.sum()) == 42.0
    assert obs.calls == 2 and reward.calls == 3  # obs: matches only; reward: evaluation + matches
    assert torch.equal(kept[1].obs, rb.storage.get(torch.arange(8, 15))["obs"] * 2)
    assert rb.query(lambda t: True)[0].length == 5 and obs.calls == 3


def test_query_list_storage_and_errors() -> None:
    rb = ReplayBuffer(storage=ListStorage(10))
    rb.extend(list(_data((2, 3)).unbind(0)))
    assert [t.length for t in rb.query(traj.reward.sum() > 5)] == [3]
    assert ReplayBuffer(storage=LazyTensorStorage(3)).query() == []
    rb = ReplayBuffer(storage=ListStorage(10))
    rb.extend([1, 2])
    with pytest.raises(TypeError, match="tensordict-backed"):
        rb.query()
