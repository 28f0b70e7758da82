import pytest
import torch

from rl_buffers import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    RandomSampler,
    SamplerWithoutReplacement,
    SliceSampler,
    TensorDictMaxValueWriter,
    TensorDictReplayBuffer,
    TensorDictRoundRobinWriter,
)  # fmt: skip

from ._data import transitions

STORAGES = {"list": ListStorage, "tensor": LazyTensorStorage, "memmap": LazyMemmapStorage}
SAMPLERS = {
    "random": lambda: RandomSampler(),
    "without": lambda: SamplerWithoutReplacement(),
    "prioritized": lambda: PrioritizedSampler(30, 0.7, 0.5, backend="torch"),
    "slice": lambda: SliceSampler(slice_len=2),
}
WRITERS = {
    "roundrobin": TensorDictRoundRobinWriter,
    "maxvalue": lambda: TensorDictMaxValueWriter(rank_key="r"),
}


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("writer", WRITERS)
def test_dumps_loads_roundtrip(tmp_path, storage, sampler, writer):
    if storage == "list" and sampler == "slice":
        pytest.skip("slice samplers need a tensor storage")

    def build():
        return TensorDictReplayBuffer(storage=STORAGES[storage](30), sampler=SAMPLERS[sampler](),
                                      writer=WRITERS[writer](), batch_size=4)  # fmt: skip

    rb = build()
    for i in range(3):
        data = transitions(14, start=20 * i)
        data["r"] = torch.randn(14)
        rb.extend(data)
    if sampler == "prioritized":
        rb.update_priority(torch.arange(5), torch.arange(1.0, 6.0))
    if sampler == "without":
        rb.sample()
    rb.dumps(tmp_path / "ckpt")
    rb.dumps(tmp_path / "ckpt")  # overwriting a checkpoint is atomic too
    other = build()
    other.loads(tmp_path / "ckpt")
    assert len(other) == len(rb)
    n = len(rb)
    a, b = rb.storage.get(torch.arange(n)), other.storage.get(torch.arange(n))
    if storage == "list":
        assert all((x == y).all() for x, y in zip(a, b, strict=False))
    else:
        assert (a == b).all()
    assert other.writer.state_dict().keys() == rb.writer.state_dict().keys()
    for key, value in rb.writer.state_dict().items():
        assert torch.equal(torch.as_tensor(other.writer.state_dict()[key]), torch.as_tensor(value))
    if sampler == "prioritized":
        assert torch.equal(other.sampler.priorities(), rb.sampler.priorities())
        assert other.sampler.default_priority == rb.sampler.default_priority
    if sampler == "without":
        assert torch.equal(other.sampler.state_dict()["perm"], rb.sampler.state_dict()["perm"])
    data = transitions(3, start=500)
    data["r"] = torch.full((3,), 100.0)
    assert torch.equal(other.extend(data), rb.extend(data))  # cursor restored
