"""RayCollector on a local cluster (ray.init(num_cpus=2)): one module-scoped Ray instance."""

from __future__ import annotations

import functools
import os

import pytest
import torch

# Under `uv run`, Ray would package the whole checkout and start every actor through
# `uv run`; these tests want plain local actors using this interpreter.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow  # Ray start-up plus actors importing torch: ~1-2 min on 2 cores

import rl_collectors_toy_env  # noqa: E402
from rl_collectors_toy_env import ScalePolicy, make_toy_env  # noqa: E402

from rl_collectors import RayCollector, WorkerError  # noqa: E402

TOY_2 = functools.partial(make_toy_env, batch_size=(2,))


@pytest.fixture(scope="module")
def local_ray():
    # Actors unpickle the test env by value: the tests folder is not on their path.
    ray.cloudpickle.register_pickle_by_value(rl_collectors_toy_env)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    ray.cloudpickle.unregister_pickle_by_value(rl_collectors_toy_env)


def test_sync_and_async_with_weight_sync(local_ray: None) -> None:
    policy = ScalePolicy(0.0)
    collector = RayCollector(TOY_2, policy, num_collectors=2, frames_per_batch=40, total_frames=120)
    batches = []
    for batch in collector:
        batches.append(batch)
        with torch.no_grad():
            policy.weight.fill_(5.0)
        collector.update_policy_weights_()
    assert [b.shape for b in batches] == [torch.Size([2, 2, 10])] * 3 and collector.frames == 120
    assert [b["policy_version"].unique().tolist() for b in batches] == [[0], [1], [2]]
    assert (batches[0]["action"] == 0).all() and (batches[1]["action"] != 0).any()
    ids = torch.cat([b["collector", "traj_ids"].reshape(-1) for b in batches])
    assert ids.min() >= 0

    state = collector.state_dict()
    collector.shutdown()
    resumed = RayCollector(
        TOY_2, policy, num_collectors=2, frames_per_batch=20, total_frames=150, sync=False
    )
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert sum(b.numel() for b in rest) == 30 and resumed.frames == 150
    assert all(b.shape[0] == 2 for b in rest)
    new_ids = torch.cat([b["collector", "traj_ids"].reshape(-1) for b in rest])
    assert set(new_ids.tolist()).isdisjoint(ids.tolist())
    resumed.shutdown()


def test_failing_actor_raises(local_ray: None) -> None:
    collector = RayCollector(
        functools.partial(make_toy_env, fail_after=5), None, num_collectors=1, frames_per_batch=20
    )
    with pytest.raises(WorkerError, match="ToyEnv failure injected"):
        collector.next()


def test_set_seed_and_reset_reach_every_actor(local_ray: None) -> None:
    from rl_collectors_toy_env import SeededToyEnv

    collector = RayCollector(SeededToyEnv, None, num_collectors=2, frames_per_batch=4)
    collector.next()
    assert collector.set_seed(5) == 7  # actor 0 gets 5, actor 1 gets 6
    batch = collector.next()
    assert sorted(int(v) // 100 for v in batch["observation"][:, 0, 1]) == [5, 6]
    assert (batch["observation"][:, 0, 0] == 0).all(), "seeding restarts the episodes"
    collector.next()
    collector.reset()
    assert (collector.next()["observation"][:, 0, 0] == 0).all()
    collector.shutdown()
