"""A write transform that returns None holds the batch back: nothing is written (TorchRL's rule)."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rl_buffers import LazyTensorStorage, ListStorage, ReplayBuffer, TensorDictReplayBuffer


class HoldUntilTwo:
    """Releases the batches it was given once two have come (like a GRPO group)."""

    def __init__(self) -> None:
        self.held: list[TensorDict] = []

    def __call__(self, data: TensorDict) -> TensorDict:
        return data

    def inv(self, data: TensorDict) -> TensorDict | None:
        self.held.append(data)
        if len(self.held) < 2:
            return None
        out, self.held = torch.cat(self.held), []
        return out


def _batch(value: float) -> TensorDict:
    return TensorDict({"x": torch.full((3, 1), value)}, batch_size=[3])


def test_a_held_back_batch_writes_nothing_and_returns_an_empty_index():
    buffer = ReplayBuffer(storage=LazyTensorStorage(10))
    buffer.append_transform(HoldUntilTwo())  # its inv runs on writes
    index = buffer.extend(_batch(1.0))
    assert index.shape == (0,) and index.dtype == torch.long
    assert len(buffer) == 0
    index = buffer.extend(_batch(2.0))
    assert index.tolist() == [0, 1, 2, 3, 4, 5]
    assert buffer[:]["x"].flatten().tolist() == [1.0] * 3 + [2.0] * 3


def test_held_back_with_a_tensordict_buffer_and_a_list_storage():
    buffer = TensorDictReplayBuffer(storage=ListStorage(10))
    buffer.append_transform(HoldUntilTwo())  # its inv runs on writes
    assert buffer.extend(_batch(1.0)).numel() == 0
    assert len(buffer) == 0
    assert buffer.extend(_batch(2.0)).numel() == 6
    assert len(buffer) == 6
