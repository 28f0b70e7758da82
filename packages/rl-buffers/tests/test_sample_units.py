"""Sample units: Transition (identity) and Sequence windows, through the buffer and alone."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import (
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    ReplayBuffer,
    SampleUnit,
    Sequence,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
    Transition,
)


def _rb(size: int = 10, done_at: tuple[int, ...] = (5, 9), capacity: int | None = None):
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(capacity or size), batch_size=2)
    done = torch.zeros(size, 1, dtype=torch.bool)
    done[list(done_at)] = True
    rb.extend(
        TensorDict({"obs": torch.arange(size, dtype=torch.float32), ("next", "done"): done}, [size])
    )
    return rb


def _window(unit: Sequence, rb: TensorDictReplayBuffer, anchors: list[int]):
    index, info = unit.expand(torch.tensor(anchors), {}, rb.storage)
    return index.tolist(), info["validity_mask"].tolist()


@pytest.mark.parametrize(
    ("kwargs", "anchor", "index", "valid"),
    [
        ({"length": 4}, 1, [1, 2, 3, 4], [True] * 4),
        ({"length": 4}, 4, [4, 5, 5, 5], [True, True, False, False]),  # pad past the end
        ({"length": 4, "episode_boundary": "stop"}, 4, [2, 3, 4, 5], [True] * 4),
        ({"length": 4, "episode_boundary": "include_reset"}, 4, [4, 5, 6, 7], [True] * 4),
        ({"length": 2, "burn_in": 2}, 6, [6, 6, 6, 7], [False, False, True, True]),
        ({"length": 2, "bootstrap": 1, "episode_boundary": "stop"}, 4, [3, 4, 5], [True] * 3),
        ({"length": 3, "dilation": 2}, 0, [0, 2, 4], [True, True, True]),
    ],
)
def test_sequence_windows(kwargs: dict, anchor: int, index: list, valid: list) -> None:
    assert _window(Sequence(**kwargs), _rb(), [anchor]) == (index, valid)


def test_sequence_stops_at_the_write_seam_and_unwritten_slots() -> None:
    rb = _rb(size=14, done_at=(), capacity=10)  # slots 0..3 newest (obs 10..13), 4 oldest
    unit = Sequence(length=4, episode_boundary="include_reset")
    assert _window(unit, rb, [8]) == ([8, 9, 0, 1], [True] * 4)
    assert _window(unit, rb, [2]) == ([2, 3, 3, 3], [True, True, False, False])
    burn = Sequence(length=2, burn_in=2, episode_boundary="include_reset")
    assert _window(burn, rb, [5]) == ([4, 4, 5, 6], [False, True, True, True])
    partial = _rb(size=10, done_at=(), capacity=100)
    assert _window(unit, partial, [8]) == ([8, 9, 9, 9], [True, True, False, False])


def test_sequence_info_entries_and_per_anchor_expansion() -> None:
    index, info = Sequence(length=3, burn_in=1).expand(
        torch.tensor([1, 6]), {"w": torch.tensor([1.0, 2.0]), "scalar": 3.0}, _rb().storage
    )
    assert index.tolist() == [0, 1, 2, 3, 6, 6, 7, 8]
    assert info["sequence_id"].tolist() == [0] * 4 + [1] * 4
    assert info["step_in_sequence"].tolist() == [0, 1, 2, 3] * 2
    assert info["learning_mask"].tolist() == [False, True, True, True] * 2
    assert info["anchor_index"].tolist() == [1] * 4 + [6] * 4
    assert info["w"].tolist() == [1.0] * 4 + [2.0] * 4 and info["scalar"] == 3.0


def test_sequence_on_two_dim_storage_keeps_the_env() -> None:
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(12, ndim=2))
    done = torch.zeros(2, 6, 1, dtype=torch.bool)
    done[0, 2] = True
    rb.extend(TensorDict({"obs": torch.arange(12).reshape(2, 6), ("next", "done"): done}, [2, 6]))
    index, info = Sequence(length=3).expand(torch.tensor([[0, 1], [1, 1]]), {}, rb.storage)
    assert index.tolist() == [[0, 1], [0, 2], [0, 2], [1, 1], [1, 2], [1, 3]]
    assert info["validity_mask"].tolist() == [True, True, False, True, True, True]


def test_sampling_through_the_buffer_writes_unit_entries() -> None:
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(20), batch_size=2, sample_unit=Sequence(3, burn_in=1)
    )
    rb.extend(
        TensorDict(
            {"obs": torch.arange(20.0), ("next", "done"): torch.zeros(20, 1, dtype=torch.bool)},
            [20],
        )
    )
    sample, info = rb.sample(return_info=True)
    assert sample.shape == (8,) and torch.equal(sample["index"], info["index"])
    assert sample["learning_mask"].sum() == 6 and "anchor_index" in sample
    plain = ReplayBuffer(storage=LazyTensorStorage(5), batch_size=3, sample_unit=Transition())
    plain.extend(torch.arange(5))
    assert set(plain.sample(return_info=True)[1]) == {"index"}
    with pytest.raises(TypeError, match="sample_unit"):
        ReplayBuffer(sample_unit=object())


def test_custom_unit_and_storage_checks() -> None:
    class Twice(SampleUnit):
        def expand(self, index, info, storage):
            return index.repeat_interleave(2), {**info, "copy": torch.arange(2 * len(index)) % 2}

    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3, sample_unit=Twice())
    rb.extend(torch.arange(10.0))
    sample = rb.sample()
    assert sample.shape == (6,) and torch.equal(sample[0::2], sample[1::2])
    with pytest.raises(TypeError, match="TensorStorage"):
        Sequence(3).expand(torch.tensor([0]), {}, ListStorage(3))
    with pytest.raises(TypeError, match="TensorDict"):
        Sequence(3).expand(torch.tensor([0]), {}, rb.storage)
    with pytest.raises(ValueError, match="dilation"):
        Sequence(3, dilation=0)


def test_priorities_go_to_anchors_as_the_max_over_valid_records() -> None:
    rb = TensorDictPrioritizedReplayBuffer(
        alpha=1.0, beta=1.0, storage=LazyTensorStorage(20), batch_size=2, sample_unit=Sequence(4)
    )
    done = torch.zeros(20, 1, dtype=torch.bool)
    done[9] = True
    rb.extend(TensorDict({"obs": torch.arange(20.0), ("next", "done"): done}, [20]))
    rb.update_priority(torch.arange(20), torch.ones(20))
    index, info = Sequence(4).expand(torch.tensor([7, 7]), {}, rb.storage)
    data = rb.storage.get(index)
    data.update(
        {
            "index": index,
            "anchor_index": info["anchor_index"],
            "validity_mask": info["validity_mask"],
        }
    )
    data["td_error"] = torch.tensor([1.0, 2.0, 3.0, 50.0, 4.0, 5.0, 6.0, 60.0])  # 50, 60: padded
    rb.update_tensordict_priority(data)
    weights = torch.tensor([float(rb.sampler._sum_tree[i]) for i in range(20)])
    expected = torch.ones(20)
    expected[7] = 6.0
    torch.testing.assert_close(weights, expected)


def test_prioritized_weights_expand_block_constant() -> None:
    rb = ReplayBuffer(storage=LazyTensorStorage(20), sampler=PrioritizedSampler(20, 0.7, 0.9), batch_size=4,
                      sample_unit=Sequence(length=3))  # fmt: skip
    rb.extend(
        TensorDict(
            {"obs": torch.arange(20.0), ("next", "done"): torch.zeros(20, 1, dtype=torch.bool)},
            [20],
        )
    )
    rb.update_priority(torch.arange(20), torch.rand(20) + 0.1)
    _, info = rb.sample(return_info=True)
    weight = info["priority_weight"].reshape(4, 3)
    torch.testing.assert_close(weight, weight[:, :1].expand(4, 3))
