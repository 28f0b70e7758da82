"""CompressedListStorage: what goes in comes out bit for bit, smaller in memory."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rl_buffers import CompressedListStorage, ReplayBuffer


def test_round_trip_of_tensors_tensordicts_and_objects() -> None:
    storage = CompressedListStorage(10, compression_level=6)
    frames = torch.zeros(4, 3, 32, 32, dtype=torch.uint8)
    frames[:, :, :8] = 255
    td = TensorDict({"pixels": frames, ("next", "reward"): torch.randn(4, 1)}, batch_size=[4])
    storage.set(torch.arange(4), td)
    out = torch.stack(storage.get(torch.tensor([3, 0])))
    assert torch.equal(out["pixels"], frames[[3, 0]])
    assert torch.equal(out["next", "reward"], td["next", "reward"][[3, 0]])
    assert storage.nbytes() < frames.numel()  # the frames compress well
    other = CompressedListStorage(3)
    other.set(torch.arange(2), [torch.arange(5.0).double(), "text"])
    assert other[0].dtype == torch.float64 and torch.equal(other[0], torch.arange(5.0).double())
    assert other[1] == "text"


def test_in_a_replay_buffer_and_custom_codecs() -> None:
    calls = []

    def compress(t: torch.Tensor) -> torch.Tensor:
        calls.append("c")
        return t.reshape(-1).view(torch.uint8).clone()

    def decompress(b: torch.Tensor, meta: dict) -> torch.Tensor:
        calls.append("d")
        return b.view(meta["dtype"]).reshape(meta["shape"])

    rb = ReplayBuffer(
        storage=CompressedListStorage(10, compression_fn=compress, decompression_fn=decompress),
        batch_size=2,
    )
    rb.extend(torch.arange(6.0).reshape(3, 2))
    sample = rb.sample()
    assert sample.shape == (2, 2) and set(sample[:, 0].tolist()) <= {0.0, 2.0, 4.0}
    assert calls.count("c") == 3 and calls.count("d") == 2
    assert rb[1].tolist() == [2.0, 3.0]
