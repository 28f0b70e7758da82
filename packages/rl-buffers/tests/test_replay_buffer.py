import threading

import pytest
import torch

from rl_buffers import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)

from ._data import transitions

STORAGES = [lambda: ListStorage(50), lambda: LazyTensorStorage(50), lambda: LazyMemmapStorage(50)]


def test_seed_example_list_storage():
    rb = ReplayBuffer(collate_fn=lambda x: x)
    rb.add(1)
    assert rb.sample(1) == [1]
    rb.extend([2, 3])
    assert sorted(set(rb.sample(50))) == [1, 2, 3]
    rb = PrioritizedReplayBuffer(alpha=0.7, beta=1.1, collate_fn=lambda x: x, backend="torch")
    rb.add(1)
    rb.sample(1)
    rb.update_priority(1, 0.5)  # any index within capacity


@pytest.mark.parametrize("make", STORAGES)
def test_tensordict_buffer_roundtrip(make):
    rb = TensorDictReplayBuffer(storage=make(), batch_size=8)
    data = transitions(20)
    index = rb.extend(data)
    assert torch.equal(index, torch.arange(20)) and torch.equal(data["index"], torch.arange(20))
    assert len(rb) == 20
    sample = rb.sample()
    assert sample.shape == (8,)
    assert torch.equal(sample["observation"], data["observation"][sample["index"]])
    assert torch.equal(sample["next", "observation"], data["next", "observation"][sample["index"]])
    rb.extend(data)  # re-extending data that now holds "index" is fine
    assert len(rb) == 40


@pytest.mark.parametrize("kind", ["tensor", "tuple", "dict"])
def test_tensor_and_pytree_data(kind):
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
    x, y = torch.arange(6.0), torch.arange(6) * 2
    data = {"tensor": x, "tuple": (x, y), "dict": {"x": x, "y": y}}[kind]
    rb.extend(data)
    s, info = rb.sample(return_info=True)
    index = info["index"]
    if kind == "tensor":
        assert torch.equal(s, x[index])
    elif kind == "tuple":
        assert torch.equal(s[0], x[index]) and torch.equal(s[1], y[index])
    else:
        assert torch.equal(s["y"], y[index])


def test_ring_buffer_overwrites_oldest():
    rb = ReplayBuffer(storage=LazyTensorStorage(5))
    rb.extend(torch.arange(4.0))
    rb.extend(torch.arange(4.0, 7.0))
    assert torch.equal(rb.storage.get(torch.arange(5)), torch.tensor([5.0, 6.0, 2.0, 3.0, 4.0]))
    rb.extend(torch.arange(10.0, 22.0))  # more than the capacity: the last 5 survive
    assert sorted(rb.storage.get(torch.arange(5)).tolist()) == [17.0, 18.0, 19.0, 20.0, 21.0]


def test_add_iter_empty_transform_prefetch():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(16), sampler=SamplerWithoutReplacement(),
                                batch_size=4, transform=lambda td: td.set("seen", torch.ones(td.shape)))  # fmt: skip
    for i in range(10):
        rb.add(transitions(1, start=i)[0])
    batches = list(rb)
    assert sum(b.shape[0] for b in batches) == 10 and all("seen" in b for b in batches)
    seen = torch.cat([b["observation"][:, 0] for b in batches]).sort().values
    assert torch.equal(seen, torch.arange(10.0))
    rb.empty()
    assert len(rb) == 0
    with pytest.raises(RuntimeError, match="Cannot sample from an empty storage"):
        rb.sample()
    pre = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=5, prefetch=3)
    pre.extend(transitions(30))
    for _ in range(6):
        s = pre.sample()
        assert torch.equal(s["observation"], transitions(30)["observation"][s["index"]])


def test_thread_safe_writes():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4000))

    def work(k):
        for i in range(20):
            rb.extend(transitions(10, start=1000 * k + 10 * i))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(rb) == 800
    values = rb.storage.get(torch.arange(800))["observation"][:, 0]
    expected = torch.cat([torch.arange(1000.0 * k, 1000.0 * k + 200) for k in range(4)])
    assert torch.equal(values.sort().values, expected.sort().values)


@pytest.mark.parametrize("make", STORAGES[1:])
@pytest.mark.parametrize("bad", ["missing", "extra", "shape", "dtype"])
def test_bad_extend_raises_and_writes_nothing(make, bad):
    rb = TensorDictReplayBuffer(storage=make())
    rb.extend(transitions(5))
    before = rb.storage.get(torch.arange(5)).clone()
    data = transitions(5, start=100)
    if bad == "missing":
        del data["next", "reward"]
        err, match = KeyError, "missing \\('next', 'reward'\\); unexpected none"
    elif bad == "extra":
        data["extra"] = torch.zeros(5)
        err, match = KeyError, "missing none; unexpected 'extra'"
    elif bad == "shape":
        data["action"] = torch.zeros(5, 3)
        err, match = ValueError, "'action' has per-item shape \\(3,\\).*expects \\(2,\\)"
    else:
        data["next", "done"] = torch.zeros(5, 1, dtype=torch.uint8)
        err, match = TypeError, "dtype torch.uint8, the storage holds torch.bool"
    with pytest.raises(err, match=match):
        rb.extend(data)
    assert len(rb) == 5 and rb.writer.state_dict()["_cursor"] == 5
    assert (rb.storage.get(torch.arange(5)) == before).all()


@pytest.mark.parametrize("priority", [-1.0, float("nan"), float("inf")])
def test_bad_priorities_raise_and_change_nothing(priority):
    rb = TensorDictPrioritizedReplayBuffer(
        alpha=0.6, beta=0.4, storage=LazyTensorStorage(10), backend="torch"
    )
    rb.extend(transitions(4))
    before = rb.sampler.priorities().clone()
    with pytest.raises(ValueError, match="finite and >= 0"):
        rb.update_priority(torch.tensor([0, 1]), torch.tensor([0.5, priority]))
    assert torch.equal(rb.sampler.priorities(), before)


def test_sample_without_batch_size_raises():
    rb = ReplayBuffer(storage=LazyTensorStorage(4))
    rb.extend(torch.zeros(2))
    with pytest.raises(ValueError, match="needs a batch_size"):
        rb.sample()


def test_prioritized_td_buffer_keys_and_priority_key():
    rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(10),
                                           priority_weight_key="priority_weight", backend="torch")  # fmt: skip
    data = transitions(4)
    data["td_error"] = torch.tensor([0.0, 0.0, 0.0, 3.0])
    rb.extend(data)
    s = rb.sample(20)
    assert "priority_weight" in s and torch.equal(s["index"], torch.full((20,), 3))
    s["td_error"] = torch.full((20,), 1.0)
    rb.update_tensordict_priority(s)
    assert torch.allclose(rb.sampler.priorities()[3], torch.tensor(1.0 + 1e-8))


# the built-in key, then one set afterwards
@pytest.mark.parametrize("weight_key", ["priority_weight", ("meta", "w")])
@pytest.mark.parametrize("ndim", [1, 2])
def test_sampled_tensordict_carries_index_and_weight(weight_key, ndim):
    rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=0.5, storage=LazyTensorStorage(40, ndim=ndim),
                                           priority_weight_key=weight_key, backend="torch")  # fmt: skip
    data = transitions(20) if ndim == 1 else torch.stack([transitions(10), transitions(10, 10)])
    rb.extend(data)
    rb.update_priority(rb.sample(5)["index"], torch.rand(5) + 0.5)
    s, info = rb.sample(16, return_info=True)
    assert s.batch_size == (16,) and s.device == torch.device(
        "cpu"
    )  # the storage device, as TorchRL
    assert torch.equal(s["index"], info["index"])
    assert torch.equal(s[weight_key], info["priority_weight"])
    flat = data if ndim == 1 else data.reshape(-1)
    pos = info["index"] if ndim == 1 else info["index"][:, 0] * 10 + info["index"][:, 1]
    assert torch.equal(s["observation"], flat["observation"][pos])
    with pytest.raises(RuntimeError):  # later writes are still validated
        s.set("bad", torch.zeros(3))


class _DoubleOnWrite:
    """A transform with an inverse: ``inv`` runs on writes, ``__call__`` on samples."""

    def inv(self, td):
        return td.set("obs", td["obs"] * 2)

    def __call__(self, td):
        return td.set("seen", torch.ones(td.shape))


def test_transform_inv_runs_on_extend_and_forward_on_sample() -> None:
    from tensordict import TensorDict

    rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=_DoubleOnWrite(), batch_size=4)
    rb.extend(TensorDict(obs=torch.arange(4.0), batch_size=[4]))
    assert torch.equal(rb.storage.get(torch.arange(4))["obs"], torch.arange(4.0) * 2)
    sample = rb.sample()
    assert (sample["seen"] == 1).all() and set(sample["obs"].tolist()) <= {0.0, 2.0, 4.0, 6.0}
