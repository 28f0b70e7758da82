"""MultiSyncCollector / MultiAsyncCollector: shapes, frames, ids, weight sync, preemption, faults."""

from __future__ import annotations

import functools
import multiprocessing
import pickle
import threading

import pytest
import torch
from rl_collectors_toy_env import (
    PrivateOutputPolicy,
    ScalePolicy,
    SeededToyEnv,
    WorkerOnlyScalePolicyFactory,
    as_python_list,
    make_labelled_toy_env,
    make_toy_env,
    make_toy_env_with_a_child_process,
)

from rl_collectors import (
    MultiAsyncCollector,
    MultiaSyncDataCollector,
    MultiProcessWeightSyncScheme,
    MultiSyncCollector,
    MultiSyncDataCollector,
    WorkerError,
)

TOY_2 = functools.partial(make_toy_env, batch_size=(2,))


def _ids_match_episodes(
    batches: list[torch.Tensor], ids: list[torch.Tensor], workers: list[torch.Tensor]
) -> None:
    """Same id <=> same (worker, sub-env, episode); checked over all batches together."""
    pairs = set()
    for obs, traj, worker in zip(batches, ids, workers, strict=True):
        key = worker * 10**6 + obs[..., 1] * 1000 + obs[..., 2]
        pairs |= {
            (int(i), float(k)) for i, k in zip(traj.flatten(), key.flatten(), strict=True) if i >= 0
        }
    assert len({i for i, _ in pairs}) == len(pairs) == len({k for _, k in pairs})


def test_sync_shapes_frames_ids_and_weight_sync() -> None:
    policy = ScalePolicy(0.0)
    with MultiSyncCollector(
        TOY_2,
        policy,
        num_workers=2,
        frames_per_batch=40,
        total_frames=120,
        track_policy_version=True,
    ) as collector:
        batches = []
        for batch in collector:
            batches.append(batch)
            with torch.no_grad():
                policy.weight.fill_(5.0)
            collector.update_policy_weights_()
        assert collector.frames == 120 and collector.last_timings.frames == 40
    assert [b.shape for b in batches] == [torch.Size([2, 2, 10])] * 3
    versions = [b["policy_version"].unique().tolist() for b in batches]
    assert versions == [[0], [1], [2]]
    # Version 0 acted with weight 0 (action 0); after the sync the workers act differently.
    assert (batches[0]["action"] == 0).all()
    assert (batches[1]["action"] != 0).any() and (batches[2]["action"] != 0).any()
    worker = torch.arange(2).reshape(2, 1, 1).expand(2, 2, 10)
    _ids_match_episodes([b["observation"] for b in batches], [b["collector", "traj_ids"] for b in batches],
                        [worker] * 3)  # fmt: skip


def test_sync_split_flatten_and_buffer() -> None:
    class ListBuffer:
        def __init__(self) -> None:
            self.items: list = []

        def extend(self, td: object) -> None:
            self.items.append(td)

    buffer = ListBuffer()
    collector = MultiSyncDataCollector([TOY_2, TOY_2], None, frames_per_batch=8, total_frames=16, flatten=True,
                                       replay_buffer=buffer)  # fmt: skip
    assert list(collector) == [None, None]
    assert [b.shape for b in buffer.items] == [torch.Size([8])] * 2
    collector.shutdown()
    split = MultiSyncCollector(
        TOY_2, None, num_workers=2, frames_per_batch=40, total_frames=40, split_trajs=True
    )
    out = split.next()
    split.shutdown()
    assert int(out["collector", "mask"].sum()) == 40


def test_sync_extends_the_buffer_with_each_workers_piece() -> None:
    """As TorchRL's workers each extend the shared buffer: one ``[*env.batch_size, T]``
    piece per worker, in worker order, and iteration yields ``None``."""
    items: list = []

    class ListBuffer:
        def extend(self, td: object) -> None:
            items.append(td)

    with MultiSyncCollector([TOY_2, TOY_2], None, frames_per_batch=16, total_frames=32,
                            replay_buffer=ListBuffer()) as collector:  # fmt: skip
        assert list(collector) == [None, None]
    assert [b.shape for b in items] == [torch.Size([2, 4])] * 4
    # worker 0 then worker 1 per batch: their trajectory ids are even, then odd
    assert [int(b["collector", "traj_ids"][0, 0]) % 2 for b in items] == [0, 1, 0, 1]


def test_async_frames_versions_and_outputs() -> None:
    policy = ScalePolicy(0.0)
    collector = MultiAsyncCollector(
        TOY_2,
        policy,
        num_workers=2,
        frames_per_batch=20,
        total_frames=210,
        track_policy_version=True,
    )
    batches = []
    for index, batch in enumerate(collector):
        batches.append(batch)
        if index == 1:
            with torch.no_grad():
                policy.weight.fill_(5.0)
            collector.update_policy_weights_()
    collector.shutdown()
    assert sum(b.numel() for b in batches) == 210 == collector.frames
    # Ten full batches and the short one that meets total_frames exactly, in any order.
    assert sorted(b.shape[-1] for b in batches) == [5] + [10] * 10 and all(
        b.shape[0] == 2 for b in batches
    )
    for batch in batches:
        version = batch["policy_version"].unique().tolist()
        assert len(version) == 1
        # Each batch's actions agree with the weights of the version that produced it.
        assert (batch["action"] == 0).all() == (version == [0])
    # At most 4 batches were dispatched before the update (2 at start, 1 after each of the
    # first two yields); every later one runs the new weights, whichever worker is faster.
    versions = [int(b["policy_version"][0, 0]) for b in batches]
    assert versions.count(0) <= 4 and versions.count(1) >= 7
    assert MultiaSyncDataCollector is MultiAsyncCollector


@pytest.mark.parametrize("threshold", [0.5, 0.0])
def test_preemption_marks_uncollected_steps(threshold: float) -> None:
    """0.0 (TorchRL's "stop after the first worker") preempts like 1 / num_workers."""
    collector = MultiSyncCollector(
        [TOY_2, TOY_2],
        None,
        frames_per_batch=400,
        create_env_kwargs=[{}, {"step_delay": 0.05}],
        preemptive_threshold=threshold,
    )
    assert not collector.interruptor.collection_stopped()
    batch = collector.next()
    collector.shutdown()
    mask = batch["collector", "mask"]
    assert mask[0].all() and not mask[1].all() and mask[1, :, 0].all()
    assert (batch["collector", "traj_ids"][~mask] == -1).all()
    assert collector.frames == int(mask.sum())


def test_preemptive_threshold_range_and_no_interruptor_at_one() -> None:
    with pytest.raises(ValueError, match=r"preemptive_threshold must be in \[0, 1\]"):
        MultiSyncCollector([TOY_2, TOY_2], None, frames_per_batch=8, preemptive_threshold=1.5)
    with MultiSyncCollector([TOY_2], None, frames_per_batch=4, preemptive_threshold=1.0) as c:
        assert c.interruptor is None and c.preemptive_threshold == 1.0


@pytest.mark.parametrize(
    ("env_kwargs", "match"),
    [({"fail_after": 15}, "ToyEnv failure injected"), ({"hard_exit_after": 15}, "exit code 3")],
)
def test_crashing_worker_raises_without_orphans(env_kwargs: dict, match: str) -> None:
    collector = MultiSyncCollector(
        [TOY_2, functools.partial(make_toy_env, batch_size=(2,), **env_kwargs)],
        None,
        frames_per_batch=40,
        total_frames=400,
    )
    procs = list(collector._procs)
    with pytest.raises(WorkerError, match=match):
        for _ in collector:
            pass
    assert all(p._closed for p in procs)  # joined and released by shutdown
    names = [p.name for p in multiprocessing.active_children()]
    assert not any(name.startswith("rl-collectors-worker") for name in names)


def test_state_dict_resume() -> None:
    collector = MultiSyncCollector(
        TOY_2, ScalePolicy(1.0), num_workers=2, frames_per_batch=8, total_frames=40
    )
    seen = [collector.next(), collector.next()]
    state = collector.state_dict()
    collector.shutdown()
    resumed = MultiSyncCollector(
        TOY_2, ScalePolicy(0.0), num_workers=2, frames_per_batch=8, total_frames=40
    )
    resumed.load_state_dict(state)
    # TorchRL's "traj_pool": above every id given so far, and moving on once loaded
    assert resumed.state_dict()["traj_pool"]["traj_id"] > state["traj_pool"]["traj_id"]
    rest = list(resumed)
    resumed.shutdown()
    assert resumed.frames == 40 and sum(b.numel() for b in seen + rest) == 40
    assert resumed.policy.weight.item() == 1.0
    old = set(torch.cat([b["collector", "traj_ids"].flatten() for b in seen]).tolist())
    new = set(torch.cat([b["collector", "traj_ids"].flatten() for b in rest]).tolist())
    assert old.isdisjoint(new)
    assert state["traj_pool"]["traj_id"].item() > max(old)


def test_frame_counts_are_rounded_up_to_whole_steps_of_every_worker() -> None:
    """As TorchRL: 30 frames over 2 workers x 2 sub-envs become 32; total 42 becomes 44."""
    with (
        pytest.warns(UserWarning, match="frames_per_batch=30 .* rounded up to 32"),
        pytest.warns(UserWarning, match="total_frames=42 .* 44 frames"),
    ):
        collector = MultiSyncCollector(
            TOY_2, None, num_workers=2, frames_per_batch=30, total_frames=42
        )
    with collector:
        assert [batch.numel() for batch in collector] == [32, 12]


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_env_instances_are_pickled_to_the_workers(cls) -> None:
    """As in TorchRL, env instances work like constructors: each worker unpickles its copy."""
    from rl_collectors_toy_env import ToyEnv

    parent_env = ToyEnv((2,))
    kwargs = {"frames_per_batch": 40, "total_frames": 80}
    with cls([parent_env, parent_env], ScalePolicy(1.0), **kwargs) as collector:
        from_instances = [b.clone() for b in collector]
    with cls([TOY_2, TOY_2], ScalePolicy(1.0), **kwargs) as collector:
        from_constructors = [b.clone() for b in collector]
    assert len(from_instances) == len(from_constructors) > 0
    for a, b in zip(from_instances, from_constructors, strict=True):
        assert a.shape == b.shape
        assert set(a.keys(True, True)) == set(b.keys(True, True))
    if cls is MultiSyncCollector:  # the async one yields workers in arrival order
        for a, b in zip(from_instances, from_constructors, strict=True):
            assert torch.equal(a["observation"], b["observation"])
    assert parent_env.total_steps == 0, "the workers step their own copies"


def test_env_instance_holding_a_lambda_goes_by_value() -> None:
    """Plain pickle refuses a lambda attribute; cloudpickle sends it (TorchRL's behaviour)."""
    from rl_collectors_toy_env import ToyEnv

    env = ToyEnv((2,))
    env.hook = lambda td: td
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(env)
    kwargs = {"frames_per_batch": 8, "total_frames": 16}
    with MultiSyncCollector([env, env], ScalePolicy(1.0), **kwargs) as collector:
        batches = [b.clone() for b in collector]
    assert sum(b.numel() for b in batches) == 16


def test_unpicklable_env_instance_is_explained() -> None:
    from rl_collectors_toy_env import ToyEnv

    env = ToyEnv((2,))
    env.lock = threading.Lock()  # neither pickle nor cloudpickle takes a lock
    with pytest.raises(TypeError, match=r"cannot be pickled.*constructor"):
        MultiSyncCollector([env, env], None, frames_per_batch=4)


def test_non_env_non_callable_is_refused() -> None:
    with pytest.raises(TypeError, match=r"env instance.*constructor"):
        MultiSyncCollector([3, 4], None, frames_per_batch=4)


def test_workers_start_after_tensordict_leaked_its_lazy_legacy_variable(monkeypatch) -> None:
    # tensordict 0.14's set_lazy_legacy (used inside from_modules and torch.stack) leaves
    # LAZY_LEGACY_OP="None" behind; a worker importing tensordict with it failed at every stack.
    from rl_collectors_toy_env import make_toy_env_after_a_stack

    monkeypatch.setenv("LAZY_LEGACY_OP", "None")
    with MultiSyncCollector(
        [make_toy_env_after_a_stack] * 2,
        None,
        frames_per_batch=4,
        total_frames=4,
        mp_start_method="spawn",
    ) as collector:
        assert collector.next().numel() == 4


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_set_seed_gives_each_worker_the_next_seed_and_reset_restarts_them(cls) -> None:
    from rl_collectors_toy_env import SeededToyEnv

    with cls([SeededToyEnv, SeededToyEnv], None, frames_per_batch=12, total_frames=-1) as collector:
        assert collector.set_seed(5) == 7  # worker 0 gets 5, worker 1 gets 6
        seen = set()
        for batch in collector:
            seen |= {int(v) // 100 for v in batch["observation"][..., 1].flatten()}
            if len(seen) == 2:
                break
        assert seen == {5, 6}
    with MultiSyncCollector(
        [SeededToyEnv, SeededToyEnv], None, frames_per_batch=4, total_frames=-1
    ) as collector:
        collector.next()
        collector.reset()
        batch = collector.next()
        assert (batch["observation"][:, 0, 0] == 0).all(), "reset restarts every worker's episode"


@pytest.mark.parametrize("cat_results", [-1, 0])
def test_cat_results_concatenates_the_workers_pieces(cat_results: int) -> None:
    def collect(**kwargs) -> object:
        with MultiSyncCollector(
            TOY_2, ScalePolicy(0.0), num_workers=2, frames_per_batch=16, total_frames=16, **kwargs
        ) as collector:
            return collector.next()

    stacked, default = collect(cat_results="stack"), collect()
    assert stacked.shape == default.shape == torch.Size([2, 2, 4])
    assert torch.equal(stacked["observation"], default["observation"])
    out = collect(cat_results=cat_results)
    # The dim counts over a piece's batch dims [2, 4] (the observation has a feature dim too).
    expected = torch.cat(stacked["observation"].unbind(0), cat_results % 2)
    assert torch.equal(out["observation"], expected)
    assert out.shape == ((2, 8) if cat_results == -1 else (4, 4))


def test_cat_results_must_be_stack_or_a_dim() -> None:
    with pytest.raises(ValueError, match="cat_results"):
        MultiSyncCollector(TOY_2, None, num_workers=2, frames_per_batch=8, cat_results="cat")


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_async_shutdown_stops_the_workers(cls) -> None:
    collector = cls(TOY_2, None, num_workers=2, frames_per_batch=8, total_frames=-1)
    collector.next()
    collector.async_shutdown(timeout=5)
    with pytest.raises(RuntimeError, match="shut down"):
        collector.next()


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_local_constructors_and_lambda_policies_reach_the_workers(cls) -> None:
    scale = 0.0

    def local_env_fn():  # a local function: plain pickle refuses it
        return make_toy_env(batch_size=(2,))

    def policy(td):
        return td.set("action", td["observation"][..., :1] * scale)

    with cls(
        [local_env_fn, lambda: local_env_fn()], policy, frames_per_batch=8, total_frames=8
    ) as collector:
        batch = collector.next()
    assert batch.numel() == 8
    assert (batch["action"] == 0).all()


def test_device_lists_give_each_worker_its_own() -> None:
    """TorchRL's form: ``device=["cpu", "cpu"]`` is one device per worker."""
    kwargs = {"frames_per_batch": 8, "total_frames": 16}
    with MultiSyncCollector([TOY_2, TOY_2], ScalePolicy(1.0), device=["cpu", "cpu"], **kwargs) as c:
        batches = [b.clone() for b in c]
    assert sum(b.numel() for b in batches) == 16
    assert all(b.device == torch.device("cpu") for b in batches)
    with pytest.raises(ValueError, match=r"list of 3 devices for 2 workers"):
        MultiSyncCollector([TOY_2, TOY_2], None, device=["cpu"] * 3, **kwargs)
    with pytest.raises(ValueError, match=r"storing devices differ"):
        MultiSyncCollector([TOY_2, TOY_2], None, storing_device=["cpu", "meta"], **kwargs)


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_start_collects_into_the_buffer_and_sees_weight_updates(cls) -> None:
    """TorchRL's ``start()`` for multiprocess collectors: batches go to the buffer in the
    background, and weights pushed meanwhile reach the workers."""
    import time

    class Buffer:
        def __init__(self) -> None:
            self.items: list = []

        def extend(self, td) -> None:
            self.items.append(td)

    buffer, policy = Buffer(), ScalePolicy(0.0)
    collector = cls([TOY_2, TOY_2], policy, frames_per_batch=8, replay_buffer=buffer)
    try:
        collector.start()
        deadline = time.monotonic() + 60
        while not buffer.items and time.monotonic() < deadline:
            time.sleep(0.01)
        assert buffer.items and (buffer.items[0]["action"] == 0).all()
        with torch.no_grad():
            policy.weight.fill_(10.0)
        collector.update_policy_weights_()
        while (buffer.items[-1]["action"] == 0).all() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (buffer.items[-1]["action"] != 0).any()
    finally:
        collector.async_shutdown(timeout=30)


def test_multi_collector_picks_the_mode_from_sync() -> None:
    from rl_collectors import MultiCollector

    with pytest.raises(TypeError, match="sync=True"):
        MultiCollector([TOY_2], None, frames_per_batch=4)
    with MultiCollector([TOY_2], None, frames_per_batch=4, sync=False) as collector:
        assert type(collector) is MultiAsyncCollector and isinstance(collector, MultiCollector)
        with pytest.raises(NotImplementedError, match="fake_tensordict"):
            collector.fake_tensordict()
    with pytest.raises(ValueError, match="does not match"):
        MultiSyncCollector([TOY_2], None, frames_per_batch=4, sync=False)


def test_async_collector_runs_one_env_in_one_worker() -> None:
    from rl_collectors import AsyncCollector

    with AsyncCollector(
        make_toy_env, None, create_env_kwargs={"batch_size": (2,)}, frames_per_batch=4,
        total_frames=8,
    ) as collector:  # fmt: skip
        assert collector.num_workers == 1 and isinstance(collector, MultiAsyncCollector)
        batches = list(collector)
    assert [b.shape for b in batches] == [(2, 2), (2, 2)]
    assert batches[0].names == [None, "time"]


def test_sequence_frames_per_batch_gives_each_sync_worker_its_count() -> None:
    with MultiSyncCollector(
        [make_toy_env] * 2, None, frames_per_batch=[6, 2], total_frames=16
    ) as c:
        batches = list(c)
    assert [b.shape for b in batches] == [torch.Size([2, 6])] * 2
    # Worker 1 collects 2 steps per batch; the rest of its row is marked as not collected.
    assert batches[0]["collector", "mask"].sum(-1).tolist() == [6, 2]
    assert c.frames == 16


def test_sequence_frames_per_batch_async_batches_hold_the_sum() -> None:
    with MultiAsyncCollector(
        [make_toy_env] * 2, None, frames_per_batch=[6, 2], total_frames=24
    ) as c:
        assert [b.numel() for b in c] == [8, 8, 8]


def test_sequence_frames_per_batch_needs_one_count_per_worker() -> None:
    with pytest.raises(ValueError, match="exactly one value per worker"):
        MultiSyncCollector([make_toy_env] * 2, None, frames_per_batch=[6], total_frames=12)


def test_async_set_seed_while_iterating_restarts_the_collection() -> None:
    policy = ScalePolicy(1.0)  # deterministic: a seeded env gives the same batch again
    with MultiAsyncCollector([SeededToyEnv], policy, frames_per_batch=5, total_frames=-1) as c:
        c.set_seed(7)
        batches = []
        for index, batch in enumerate(c):
            batches.append(batch)
            if index == 0:
                c.set_seed(7)  # the batch in flight (old seed) is dropped
            if index == 2:
                break
    # Columns: step within the episode, 100 * seed + sub-env (the episode count goes on).
    first, second, third = (b["observation"][..., :2] for b in batches)
    assert torch.equal(first, second)
    assert not torch.equal(first, third)


def test_worker_env_may_start_its_own_processes() -> None:
    with MultiSyncCollector(
        [make_toy_env_with_a_child_process] * 2, None, frames_per_batch=4, total_frames=4
    ) as c:
        assert [b.numel() for b in c] == [4]


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_policy_factory_runs_in_the_workers_and_syncs_from_the_parent_policy(cls) -> None:
    trainer = ScalePolicy(0.0)
    with cls([make_toy_env] * 2, trainer, policy_factory=WorkerOnlyScalePolicyFactory(0.0),
             frames_per_batch=8, total_frames=-1) as c:  # fmt: skip
        first = c.next()
        with torch.no_grad():
            trainer.weight.fill_(5.0)
        c.update_policy_weights_()
        if cls is MultiSyncCollector:
            updated = [[c.next() for _ in range(3)][-1]]
        else:  # batches the workers began before the update may come first (timing), then new
            batches = [c.next() for _ in range(20)]
            updated = [b for b in batches if (b["action"] != 0).any()][:1]
    assert (first["action"] == 0).all()
    assert updated and (updated[0]["action"] != 0).any()


def test_one_policy_factory_per_worker() -> None:
    factories = [WorkerOnlyScalePolicyFactory(0.0), WorkerOnlyScalePolicyFactory(5.0)]
    with MultiSyncCollector(
        [make_toy_env] * 2, policy_factory=factories, frames_per_batch=8, total_frames=8
    ) as c:
        batch = c.next()
    assert (batch["action"][0] == 0).all() and (batch["action"][1] != 0).any()
    with pytest.raises(ValueError, match="one per worker"):
        MultiSyncCollector([make_toy_env] * 2, policy_factory=factories[:1], frames_per_batch=8)


def test_policy_factory_weights_from_init_on_sender() -> None:
    scheme = MultiProcessWeightSyncScheme()
    scheme.init_on_sender(model=ScalePolicy(0.0), devices=["cpu"], model_id="policy")
    with MultiSyncCollector([make_toy_env] * 2, policy_factory=WorkerOnlyScalePolicyFactory(0.0),
                            frames_per_batch=8, total_frames=-1,
                            weight_sync_schemes={"policy": scheme}) as c:  # fmt: skip
        assert (c.next()["action"] == 0).all()
        c.update_policy_weights_({"weight": torch.tensor(5.0)})
        assert (c.next()["action"] != 0).any()
    with MultiSyncCollector([make_toy_env] * 2, policy_factory=WorkerOnlyScalePolicyFactory(0.0),
                            frames_per_batch=8) as c, pytest.raises(ValueError, match="init_on_sender"):  # fmt: skip
        c.update_policy_weights_({"weight": torch.tensor(5.0)})


def test_resumed_workers_keep_their_policy_version() -> None:
    kwargs = {"frames_per_batch": 8, "total_frames": -1, "track_policy_version": True}
    with MultiSyncCollector([make_toy_env] * 2, ScalePolicy(1.0), **kwargs) as c:
        c.update_policy_weights_()
        c.update_policy_weights_()
        state = c.state_dict()
    assert [state[f"worker{i}"]["policy_version"] for i in range(2)] == [2, 2]
    with MultiSyncCollector([make_toy_env] * 2, ScalePolicy(0.0), **kwargs) as resumed:
        resumed.load_state_dict(state)
        again = resumed.state_dict()
        assert (resumed.next()["policy_version"] == 2).all()
    assert [again[f"worker{i}"]["policy_version"] for i in range(2)] == [2, 2]
    assert again["policy_version"] == 2


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_non_tensor_entries_cross_the_process_boundary(cls) -> None:
    with cls([make_labelled_toy_env] * 2, None, frames_per_batch=8, total_frames=8) as c:
        batch = c.next()
    steps = batch["observation"][..., 0].long().reshape(-1).tolist()
    labels = as_python_list(batch["next", "label"])
    flat = [label for row in labels for label in row] if batch.ndim == 2 else labels
    assert flat == [f"step {n + 1}" for n in steps]


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_private_keys_are_dropped_from_multi_collector_batches(cls) -> None:
    collector = cls([TOY_2, TOY_2], PrivateOutputPolicy(1.0), frames_per_batch=8, total_frames=8)
    try:
        keys = set(collector.next().keys(True, True))
    finally:
        collector.shutdown()
    assert ("out", "kept") in keys
    assert "_noise" not in keys and ("out", "_state") not in keys
