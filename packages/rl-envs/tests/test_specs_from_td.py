"""make_composite_from_td: infer a Composite from a TensorDict."""

from __future__ import annotations

import torch
from tensordict import NonTensorData, TensorDict

from rl_envs.specs import Composite, NonTensor, Unbounded, make_composite_from_td


def sample_td(batch=(4,)):
    return TensorDict(
        {
            "obs": torch.randn(*batch, 3),
            "pixels": torch.zeros(*batch, 2, 2, 3, dtype=torch.uint8),
            "count": torch.zeros(batch, dtype=torch.int64),
            "next": {
                "reward": torch.zeros(*batch, 1),
                "done": torch.zeros(*batch, 1, dtype=torch.bool),
            },
        },
        batch_size=batch,
    )


def test_round_trip_keys_shapes_dtypes():
    td = sample_td()
    spec = make_composite_from_td(td)
    assert isinstance(spec, Composite) and spec.shape == td.batch_size
    zero = spec.zero()
    assert set(zero.keys(True, True)) == set(td.keys(True, True))
    for key in td.keys(True, True):
        expected_shape = td[key].shape if td[key].ndim > td.batch_dims else (*td[key].shape, 1)
        assert zero[key].shape == torch.Size(expected_shape), key
        assert zero[key].dtype == td[key].dtype, key
        assert isinstance(spec[key], Unbounded)
    td["count"] = td["count"].unsqueeze(-1)
    assert spec.is_in(td)


def test_no_unsqueeze_keeps_null_shapes():
    spec = make_composite_from_td(sample_td(), unsqueeze_null_shapes=False)
    assert spec["count"].shape == torch.Size([4])
    assert spec.is_in(sample_td())


def test_batch_size_prepends_dims():
    td = sample_td(())
    spec = make_composite_from_td(td, batch_size=(8, 2))
    assert spec.shape == torch.Size([8, 2])
    assert spec["obs"].shape == torch.Size([8, 2, 3])
    assert spec["next", "done"].shape == torch.Size([8, 2, 1])
    assert spec.is_in(spec.rand())


def test_non_tensor_entries():
    td = sample_td()
    td["mission"] = NonTensorData("go left", batch_size=[4])
    spec = make_composite_from_td(td)
    assert isinstance(spec["mission"], NonTensor) and spec["mission"].example_data == "go left"
    assert spec.zero()["mission"] == "go left"


def test_matches_a_hand_written_spec():
    td = TensorDict({"a": torch.zeros(2, 5), "b": {"c": torch.zeros(2, 1, dtype=torch.int32)}}, [2])
    expected = Composite(
        a=Unbounded(shape=(2, 5)),
        b=Composite(c=Unbounded(shape=(2, 1), dtype=torch.int32), shape=(2,)),
        shape=(2,),
    )
    assert make_composite_from_td(td) == expected
