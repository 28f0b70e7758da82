"""The preallocated step buffer: layout of the batches it holds."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rl_collectors._buffer import StepBuffer


def test_sub_tensordicts_keep_their_extra_batch_dims() -> None:
    agents = TensorDict({"obs": torch.zeros(3, 5, 2)}, batch_size=[3, 5])
    template = TensorDict(
        {"agents": agents, "next": {"agents": agents.clone(), "done": torch.zeros(3, 1)}}, [3]
    )
    buffer = StepBuffer(template, steps=4, extra={}, device=torch.device("cpu"))
    assert buffer.data.batch_size == (3, 4)
    assert buffer.data["agents"].batch_size == (3, 4, 5)
    assert buffer.data["next", "agents"].batch_size == (3, 4, 5)
    assert buffer.data["next", "agents", "obs"].shape == (3, 4, 5, 2)
