"""trajs_per_batch: batches of whole trajectories (TorchRL's option), against the raw batches."""

from __future__ import annotations

import pytest
from rl_collectors_toy_env import ToyEnv, make_toy_env

from rl_collectors import Collector, MultiSyncCollector


def test_padded_batches_hold_whole_trajectories() -> None:
    env = ToyEnv((2,), min_len=3, span=4)
    collector = Collector(env, None, frames_per_batch=6, total_frames=60, trajs_per_batch=3)
    batches = list(collector)
    assert batches and all(b.shape[0] == 3 for b in batches)
    for batch in batches:
        mask = batch["collector", "mask"]
        for traj, valid in zip(batch, mask, strict=True):
            steps = traj["observation"][valid]
            assert steps[:, 0].tolist() == list(range(len(steps)))  # from its first step
            assert len({(float(s[1]), float(s[2])) for s in steps}) == 1  # one episode
            assert bool(traj["next", "done"][valid][-1])  # to its last
            assert not traj["next", "done"][valid][:-1].any()


def test_cat_format_and_validation() -> None:
    batch = Collector(ToyEnv(()), None, frames_per_batch=4, total_frames=40, trajs_per_batch=2,
                      traj_format="cat").next()  # fmt: skip
    assert batch.ndim == 1 and int(batch["next", "done"].sum()) == 2
    assert bool(batch["next", "done"][-1])
    with pytest.raises(ValueError, match="'padded' or 'cat'"):
        Collector(ToyEnv(()), None, frames_per_batch=4, trajs_per_batch=2, traj_format="flat")
    with pytest.raises(ValueError, match="trajs_per_batch"):
        Collector(ToyEnv(()), None, frames_per_batch=4, traj_format="cat")


def test_reset_drops_the_trajectories_being_assembled() -> None:
    collector = Collector(
        ToyEnv((), min_len=3, span=1), None, frames_per_batch=10, trajs_per_batch=2
    )
    collector.next()
    partial, complete = collector._traj_assembly
    assert partial and complete  # 10 steps of 3-step episodes: one waiting, one in flight
    collector.reset()
    assert not partial and not complete


def test_replay_buffer_gets_whole_trajectories() -> None:
    class ListBuffer:
        def __init__(self) -> None:
            self.items: list = []

        def extend(self, td: object) -> None:
            self.items.append(td)

    buffer = ListBuffer()
    collector = MultiSyncCollector([make_toy_env] * 2, None, frames_per_batch=8, total_frames=40,
                                   trajs_per_batch=2, replay_buffer=buffer)  # fmt: skip
    outputs = list(collector)
    collector.shutdown()
    assert set(outputs) == {None} and buffer.items
    # Flat time steps, two whole trajectories one after the other (TorchRL's buffer layout).
    for item in buffer.items:
        assert item.ndim == 1 and int(item["next", "done"].sum()) == 2
        assert bool(item["next", "done"][-1])


@pytest.mark.parametrize(("trajs_per_write", "sizes"), [(None, {2, 3}), (1, {1})])
def test_trajs_per_write_sets_the_trajectories_per_buffer_write(trajs_per_write, sizes) -> None:
    class CountingBuffer:
        def __init__(self) -> None:
            self.trajs_per_extend: list[int] = []

        def extend(self, td: object) -> None:
            self.trajs_per_extend.append(int(td["next", "done"].sum()))

    buffer = CountingBuffer()
    env = ToyEnv((), min_len=3, span=1)  # 3-step episodes, 8-step batches: 2 or 3 finish each
    collector = Collector(env, None, frames_per_batch=8, total_frames=48, trajs_per_batch=2,
                          replay_buffer=buffer, trajs_per_write=trajs_per_write)  # fmt: skip
    list(collector)
    assert set(buffer.trajs_per_extend) == sizes
    assert sum(buffer.trajs_per_extend) == 16
