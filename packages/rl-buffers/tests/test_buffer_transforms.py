"""append_transform / insert_transform: order on reads, reverse inverses on writes (TorchRL's Compose)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import LazyTensorStorage, ReplayBuffer


class AddOnInv:
    """A duck env transform: forward multiplies ``x``, ``inv`` adds to it (TensorDicts only)."""

    def __init__(self, scale: float, shift: float, log: list[str]) -> None:
        self.scale, self.shift, self.log = scale, shift, log

    def __call__(self, td: TensorDict) -> TensorDict:
        self.log.append(f"fwd{self.scale:g}")
        return td.set("x", td["x"] * self.scale)

    def inv(self, td: TensorDict) -> TensorDict:
        self.log.append(f"inv{self.shift:g}")
        return td.set("x", td["x"] + self.shift)


def test_reads_in_order_writes_inverted_in_reverse() -> None:
    log: list[str] = []
    rb = ReplayBuffer(storage=LazyTensorStorage(4), batch_size=1)
    rb.append_transform(AddOnInv(2, 1, log)).append_transform(AddOnInv(3, 5, log))
    rb.insert_transform(0, AddOnInv(10, 100, log))
    rb.extend(TensorDict(x=torch.zeros(1), batch_size=[1]))
    assert log == ["inv5", "inv1", "inv100"]
    assert rb.storage[0]["x"].item() == 106.0  # ((0 + 5) + 1) + 100
    log.clear()
    assert rb.sample()["x"].item() == 106.0 * 10 * 2 * 3
    assert log == ["fwd10", "fwd2", "fwd3"]
    assert len(rb.transform) == 3


def test_invert_runs_a_function_on_writes_only() -> None:
    # TorchRL's docstring example: rb.append_transform(t, invert=True) adds 1 on extend.
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
    rb.append_transform(lambda td: td.set("a", td["a"] + 1), invert=True)
    rb.extend(TensorDict(a=torch.zeros(10), batch_size=[10]))
    assert (rb.storage[:]["a"] == 1).all() and (rb.sample()["a"] == 1).all()


def test_inverted_env_transform_runs_inv_on_reads() -> None:
    log: list[str] = []
    rb = ReplayBuffer(storage=LazyTensorStorage(4), batch_size=2)
    rb.append_transform(AddOnInv(2, 1, log), invert=True)
    rb.extend(TensorDict(x=torch.ones(2), batch_size=[2]))
    assert rb.storage[0]["x"].item() == 2.0 and log == ["fwd2"]
    assert (rb.sample()["x"] == 3.0).all() and log == ["fwd2", "inv1"]


def test_constructor_transform_comes_first_and_non_callables_are_refused() -> None:
    rb = ReplayBuffer(storage=LazyTensorStorage(4), transform=lambda x: x + 1, batch_size=2)
    rb.append_transform(lambda x: x * 2)
    rb.extend(torch.zeros(2))
    assert rb.sample().tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match="callable"):
        rb.append_transform(3)
