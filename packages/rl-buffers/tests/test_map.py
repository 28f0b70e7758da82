"""rl_buffers.map: hash modules, QueryModule ids and TensorDictMap."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_buffers import LazyTensorStorage, ListStorage
from rl_buffers.map import (
    BinaryToDecimal,
    QueryModule,
    RandomProjectionHash,
    SipHash,
    TensorDictMap,
)


def test_binary_to_decimal_sums_the_numbers_of_each_row() -> None:
    module = BinaryToDecimal(num_bits=3, device="cpu", dtype=torch.int64)
    bits = torch.tensor([[1, 0, 1, 0, 1, 1], [0, 0, 0, 1, 1, 1]])
    assert module(bits).tolist() == [5 + 3, 0 + 7]
    with pytest.raises(ValueError, match="multiple of num_bits"):
        module(torch.zeros(1, 4))


def test_hashes_equal_rows_equally() -> None:
    x = torch.tensor([[0.5, 1.0], [0.25, 1.0], [0.5, 1.0]])
    h = SipHash()(x)
    assert h.dtype == torch.int64 and h[0] == h[2] and h[0] != h[1]
    assert SipHash(as_tensor=False)(x) == [row.numpy().tobytes() for row in x]
    torch.manual_seed(0)
    projected = RandomProjectionHash(n_components=12)(torch.randn(2000, 30))
    assert projected.unique().numel() == 2000


def test_query_module_assigns_ids_in_order_of_first_sight() -> None:
    query = QueryModule(in_keys=["a", ("b", "c")], index_key=("out", "id"), clone=True)
    data = TensorDict(
        {"a": torch.tensor([[1.0], [2.0], [1.0]]), ("b", "c"): torch.zeros(3, 1)}, [3]
    )
    out = query(data)
    assert out is not data and out["out", "id"].tolist() == [0, 1, 0]
    unseen = TensorDict({"a": torch.tensor([[9.0]]), ("b", "c"): torch.zeros(1, 1)}, [1])
    assert query(unseen, extend=False)["out", "id"].tolist() == [-1]
    with pytest.raises(ValueError, match="one per key"):
        QueryModule(in_keys=["a", "b"], hash_module=[SipHash()])


@pytest.mark.parametrize("storage", [ListStorage, LazyTensorStorage])
def test_tensordict_map_reads_what_was_written(storage) -> None:
    tdmap = TensorDictMap(query_module=QueryModule(in_keys=["k"]), storage=storage(10))
    keys = TensorDict(k=torch.tensor([[3.0], [1.0], [2.0]]), batch_size=[3])
    tdmap[keys] = TensorDict(v=torch.tensor([30.0, 10.0, 20.0]), batch_size=[3])
    tdmap[keys[:1]] = TensorDict(v=torch.tensor([33.0]), batch_size=[1])  # overwrite
    back = tdmap[TensorDict(k=torch.tensor([[2.0], [3.0]]), batch_size=[2])]
    assert back["v"].tolist() == [20.0, 33.0] and len(tdmap) == 3
    probe = TensorDict(k=torch.tensor([[1.0], [7.0]]), batch_size=[2])
    assert tdmap.contains(probe).tolist() == [True, False]
    with pytest.raises(KeyError, match="never"):
        tdmap[probe]
