"""FakeCollector: spec-conforming, deterministic, resumable batches."""

from __future__ import annotations

import pytest
import torch

from rl_trainers import FakeCollector, FieldSpec

SPEC = {
    "observation": ((3,), torch.float32),
    "pixels": FieldSpec((2, 4, 4), torch.uint8, low=0, high=256),
    ("agents", "action"): {"shape": (2,), "dtype": torch.int64, "low": 1, "high": 4},
    "bounded": FieldSpec((1,), torch.float64, low=-2.0, high=-1.0),
}


def test_batches_conform_to_the_spec() -> None:
    batch = FakeCollector(SPEC, frames_per_batch=6, seed=1).next_batch()
    assert batch.batch_size == torch.Size([6])
    assert batch["observation"].shape == (6, 3) and batch["observation"].dtype == torch.float32
    assert batch["pixels"].dtype == torch.uint8
    action = batch["agents", "action"]
    assert action.shape == (6, 2) and action.min() >= 1 and action.max() < 4
    assert batch["bounded"].dtype == torch.float64
    assert ((batch["bounded"] >= -2) & (batch["bounded"] < -1)).all()
    for flag in ("done", "terminated", "truncated"):
        assert batch["next", flag].dtype == torch.bool and batch["next", flag].shape == (6, 1)
    assert torch.equal(
        batch["next", "done"], batch["next", "terminated"] | batch["next", "truncated"]
    )
    assert batch["next", "reward"].shape == (6, 1)


def test_env_batch_and_traj_ids() -> None:
    collector = FakeCollector(SPEC, frames_per_batch=12, env_batch=(3,))
    a, b = collector.next_batch(), collector.next_batch()
    assert a.batch_size == torch.Size([3, 4])
    assert a["collector", "traj_ids"][:, 0].tolist() == [0, 1, 2]
    assert b["collector", "traj_ids"][:, -1].tolist() == [3, 4, 5]
    with pytest.raises(ValueError, match="multiple"):
        FakeCollector(SPEC, frames_per_batch=10, env_batch=(3,))


def test_same_seed_same_stream_whatever_the_global_rng() -> None:
    torch.manual_seed(0)
    a = [b["observation"] for b in FakeCollector(SPEC, 4, total_frames=12, seed=5)]
    torch.manual_seed(99)
    b = [b["observation"] for b in FakeCollector(SPEC, 4, total_frames=12, seed=5)]
    assert len(a) == 3 and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    c = next(iter(FakeCollector(SPEC, 4, seed=6)))["observation"]
    assert not torch.equal(a[0], c)


def test_state_dict_resumes_the_stream() -> None:
    straight = FakeCollector(SPEC, 4, seed=2)
    batches = [straight.next_batch() for _ in range(4)]
    first = FakeCollector(SPEC, 4, seed=2)
    first.next_batch(), first.next_batch()
    resumed = FakeCollector(SPEC, 4, seed=123)
    resumed.load_state_dict(first.state_dict())
    for expected in batches[2:]:
        got = resumed.next_batch()
        assert (got == expected).all()


def test_total_frames_len_and_collector_interface() -> None:
    collector = FakeCollector(SPEC, 5, total_frames=12)
    assert len(collector) == 3 and len(list(collector)) == 3
    assert collector.set_seed(3) == 3
    collector.update_policy_weights_()
    collector.shutdown()
    assert collector.weight_updates == 1 and collector.is_shutdown
    with pytest.raises(TypeError, match="no length"):
        len(FakeCollector(SPEC, 5))


def test_spec_like_objects_and_bad_entries() -> None:
    class Spec:
        def rand(self, shape):
            return torch.full((*shape, 2), 7.0)

    batch = FakeCollector({"x": Spec()}, 3).next_batch()
    assert (batch["x"] == 7).all()
    with pytest.raises(TypeError, match="spec entry 'y'"):
        FakeCollector({"y": 3}, 3)
    with pytest.raises(ValueError, match="frames_per_batch"):
        FakeCollector(SPEC, 0)
