"""Hooks, ``stats()``, ``get_distant_attr`` / ``map_fn`` and ``track_traj_ids`` (TorchRL's API)."""

from __future__ import annotations

import functools
import json
import multiprocessing

import pytest
from rl_collectors_toy_env import ToyEnv, make_toy_env

from rl_collectors import Collector, MultiAsyncCollector, MultiSyncCollector

TOY_2 = functools.partial(make_toy_env, batch_size=(2,))


def test_hooks_run_around_each_batch_and_can_be_set_later() -> None:
    calls: list[object] = []
    collector = Collector(
        ToyEnv((2,)),
        None,
        frames_per_batch=4,
        total_frames=12,
        pre_collect_hook=lambda: calls.append("pre"),
        postproc=lambda td: td.set("marked", td["observation"][..., :1]),
    )
    assert collector.post_collect_hook is None
    collector.post_collect_hook = calls.append
    batches = list(collector)
    assert calls[0::2] == ["pre"] * 3
    assert all(seen is batch for seen, batch in zip(calls[1::2], batches, strict=True))
    assert "marked" in calls[1]


def test_hook_error_propagates() -> None:
    def hook(batch: object) -> None:
        raise RuntimeError("hook failed")

    collector = Collector(ToyEnv(()), None, frames_per_batch=2, post_collect_hook=hook)
    with pytest.raises(RuntimeError, match="hook failed"):
        collector.next()


def test_stats_snapshot_is_json_serialisable() -> None:
    collector = Collector(
        ToyEnv((2,)), None, frames_per_batch=4, total_frames=8, track_policy_version=True
    )
    assert collector.stats() == {
        "frames": 0,
        "batches": 0,
        "total_frames": 8,
        "completed": False,
        "requested_frames_per_batch": 4,
        "policy_version": 0,
    }
    seen = [collector.stats()["frames"] for _ in collector]
    assert seen == [4, 8]
    stats = json.loads(json.dumps(collector.stats()))
    assert stats["batches"] == 2 and stats["completed"] is True
    assert "total_frames" not in Collector(ToyEnv(()), None, frames_per_batch=2).stats()


def test_get_distant_attr_and_map_fn() -> None:
    collector = Collector(ToyEnv(()), None, frames_per_batch=2, worker_idx=5)
    assert collector.get_distant_attr("worker_idx") == 5
    got = collector.map_fn("get_distant_attr", [("worker_idx",), ("frames_per_batch",)])
    assert got == [5, 2]
    with pytest.raises(ValueError, match="same length"):
        collector.map_fn("get_distant_attr", [("worker_idx",)], [{}, {}])


def test_track_traj_ids_false_leaves_the_collector_entry_out() -> None:
    batch = Collector(ToyEnv((2,)), None, frames_per_batch=4, track_traj_ids=False).next()
    assert "collector" not in batch
    assert ("collector", "traj_ids") in Collector(ToyEnv(()), None, frames_per_batch=2).next()


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_multiprocess_hooks_stats_and_remote_helpers(cls: type) -> None:
    manager = multiprocessing.Manager()
    calls = manager.list()

    def record_numel(batch: object) -> None:  # a local function: sent by value
        calls.append(batch.numel())

    try:
        with cls([TOY_2, TOY_2], None, frames_per_batch=8, total_frames=16) as collector:
            with pytest.raises(ValueError, match="workers must be one of"):
                collector.stats(workers="bogus")
            assert collector.get_distant_attr("worker_idx") == [0, 1]
            assert collector.map_fn("get_distant_attr", [("worker_idx",)] * 2) == [0, 1]
            with pytest.raises(ValueError, match="Expected 2 argument entries"):
                collector.map_fn("get_distant_attr", [("worker_idx",)])
            collector.pre_collect_hook = functools.partial(calls.append, "pre")
            collector.post_collect_hook = record_numel
            batches = list(collector)
            stats = collector.stats(workers="both")
        assert sum(b.numel() for b in batches) == 16
        assert stats["workers"] == 2 and stats["workers_alive"] == 2
        assert stats["frames"] == 16 == stats["worker_0/frames"] + stats["worker_1/frames"]
        assert "pre" in list(calls) and any(isinstance(c, int) for c in calls)
    finally:
        manager.shutdown()
