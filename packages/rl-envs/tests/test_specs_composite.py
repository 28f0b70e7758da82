"""Composite: nested keys, leaves_only, locking, equality, values as TensorDicts, batch dims."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rl_envs.specs import Bounded, Categorical, Composite, NonTensor, OneHot, Unbounded


def make(batch=(3,)):
    return Composite(
        observation=Bounded(-1.0, 1.0, shape=(*batch, 4)),
        action=OneHot(2, shape=(*batch, 2)),
        next=Composite(
            reward=Unbounded(shape=(*batch, 1)),
            done=Categorical(2, shape=(*batch, 1), dtype=torch.bool),
            shape=batch,
        ),
        shape=batch,
    )


def test_nested_get_set_contains():
    spec = make()
    assert spec["next", "reward"] == Unbounded(shape=(3, 1))
    assert spec["next"]["done"].dtype == torch.bool
    assert ("next", "reward") in spec and "next" in spec and ("next", "nope") not in spec
    assert 3 not in spec
    spec["info", "count"] = Unbounded(shape=(3, 1), dtype=torch.int64)  # intermediate created
    assert isinstance(spec["info"], Composite) and spec["info"].shape == torch.Size([3])
    assert spec.set("extra", Unbounded(shape=(3,))) is spec
    assert len(spec) == 5 and list(spec)[:3] == ["observation", "action", "next"]


def test_mappings_become_composites():
    spec = Composite({"a": {"b": Unbounded(shape=(2, 1))}}, shape=(2,))
    assert isinstance(spec["a"], Composite) and spec["a"].shape == torch.Size([2])


def test_keys_include_nested_and_leaves_only():
    spec = make()
    assert spec.keys() == ["observation", "action", "next"]
    assert spec.keys(include_nested=True) == [
        "observation",
        "action",
        "next",
        ("next", "reward"),
        ("next", "done"),
    ]
    assert spec.keys(True, True) == ["observation", "action", ("next", "reward"), ("next", "done")]
    assert spec.keys(leaves_only=True) == ["observation", "action"]
    assert [k for k, _ in spec.items(True, True)] == spec.keys(True, True)
    assert len(spec.values(True, True)) == 4


def test_missing_key_error_names_key_and_present_keys():
    spec = make()
    with pytest.raises(KeyError, match=r"'obs'.*Keys present: \['action', 'next', 'observation'\]"):
        spec["obs"]
    with pytest.raises(KeyError, match=r"'rew'.*under \('next',\).*\['done', 'reward'\]"):
        spec["next", "rew"]
    with pytest.raises(KeyError, match="not a Composite"):
        spec["observation", "x"]
    assert spec.get("obs", None) is None


def test_shape_mismatch_on_set_explains_fix():
    spec = make()
    with pytest.raises(ValueError, match=r"'bad'.*\(4,\).*batch shape \(3,\).*expand"):
        spec["bad"] = Unbounded(shape=(4,))
    with pytest.raises(TypeError, match="spec or a mapping"):
        spec["bad"] = torch.zeros(3)
    with pytest.raises(TypeError, match="key is a string"):
        spec[("a", 1)] = Unbounded(shape=(3,))


def test_lock_refuses_writes_and_deletes_nested_too():
    spec = make().lock_()
    assert spec.locked and spec["next"].locked
    with pytest.raises(RuntimeError, match=r"'extra'.*locked.*unlock_"):
        spec["extra"] = Unbounded(shape=(3,))
    with pytest.raises(RuntimeError, match="locked"):
        spec["next"]["x"] = Unbounded(shape=(3,))
    with pytest.raises(RuntimeError, match="locked"):
        spec["next", "x"] = Unbounded(shape=(3,))
    with pytest.raises(RuntimeError, match="locked"):
        del spec["observation"]
    with pytest.raises(RuntimeError, match="locked"):
        spec.update({"observation": Unbounded(shape=(3, 4))})
    assert not spec.clone().locked
    spec.unlock_()
    assert not spec["next"].locked
    spec["extra"] = Unbounded(shape=(3,))
    del spec["next", "done"]
    assert "done" not in spec["next"]


def test_rand_zero_one_are_tensordicts_in_spec():
    spec = make()
    for value in (spec.rand(), spec.zero(), spec.one()):
        assert isinstance(value, TensorDict) and value.batch_size == torch.Size([3])
        assert value["next", "reward"].shape == torch.Size([3, 1])
    assert spec.is_in(spec.rand())
    # as in TorchRL, zero() is all zeros: in the spec for every leaf but the one-hot action
    assert spec.exclude("action").is_in(spec.zero())
    assert spec.zero()["observation"].abs().sum() == 0
    big = spec.rand((5,))
    assert big.batch_size == torch.Size([5, 3]) and spec.is_in(big)


def test_is_in_and_explain_name_the_key():
    spec = make()
    td = spec.rand()
    td["observation"] = torch.full((3, 4), 2.0)
    assert not spec.is_in(td)
    assert "'observation'" in spec.explain(td) and "outside" in spec.explain(td)
    td = spec.rand()
    del td["next", "reward"]
    assert not spec.is_in(td)
    assert "('next', 'reward')" in spec.explain(td) and "missing" in spec.explain(td)
    with pytest.raises(ValueError, match="reward"):
        spec.assert_is_in(td)
    assert not spec.is_in({"observation": torch.zeros(3, 4)})
    td = spec.rand()
    td["unrelated"] = torch.zeros(3)  # extra keys are ignored
    assert spec.is_in(td)


def test_project_writes_into_the_input_as_torchrl():
    spec = make()
    td = spec.rand()
    td["observation"] = torch.full((3, 4), 5.0)
    td["next", "done"] = torch.tensor([[2], [0], [1]])
    kept = td["next", "reward"]
    out = spec.project(td)
    assert out is td and spec.is_in(td)
    assert torch.equal(td["observation"], torch.ones(3, 4))
    assert td["next", "done"].tolist() == [[True], [False], [True]]
    assert td["next", "reward"] is kept  # entries already in their spec are left alone


def test_encode_from_numpy_dict():
    spec = Composite(obs=Unbounded(shape=(2,)), nested={"n": Categorical(3)})
    out = spec.encode({"obs": np.array([1.0, 2.0]), "nested": {"n": np.int64(2)}})
    assert out["obs"].dtype == torch.float32 and int(out["nested", "n"]) == 2
    with pytest.raises(KeyError, match="'nope'"):
        spec.encode({"nope": 1})


def test_equality():
    assert make() == make()
    other = make()
    other["next", "reward"] = Unbounded(shape=(3, 2))
    assert make() != other
    assert make() != make((2,))
    assert make() != Composite(make()._specs, shape=(3,), device="cpu")
    assert make() != "spec"


def test_expand_prepends_batch_dims_to_every_leaf():
    spec = make((1,))
    big = spec.expand(4, 2)
    assert big.shape == torch.Size([4, 2])
    assert big["observation"].shape == torch.Size([4, 2, 4])
    assert big["next", "done"].shape == torch.Size([4, 2, 1])
    assert big.is_in(big.rand())
    unbatched = make(())
    assert unbatched.expand(5)["action"].shape == torch.Size([5, 2])
    with pytest.raises(ValueError, match="must match"):
        make((3,)).expand(4)


def test_index_squeeze_unsqueeze_unbind():
    spec = make((3,))
    assert spec[0] == make(())
    assert spec[1:]["observation"].shape == torch.Size([2, 4])
    un = spec.unsqueeze(0)
    assert un.shape == torch.Size([1, 3]) and un["next", "reward"].shape == torch.Size([1, 3, 1])
    assert un.squeeze(0) == spec and un.squeeze() == spec
    assert all(part == make(()) for part in spec.unbind(0))


def test_update_select_exclude_empty_pop():
    spec = make()
    spec.update({"next": Composite(truncated=Unbounded(shape=(3, 1)), shape=(3,))})
    assert spec.keys(True, True)[-1] == ("next", "truncated")  # merged, not replaced
    assert ("next", "reward") in spec
    sel = spec.select("observation", ("next", "done"))
    assert sel.keys(True, True) == ["observation", ("next", "done")]
    sel["next", "x"] = Unbounded(shape=(3,))
    assert ("next", "x") not in spec  # containers are not shared
    assert spec.select("nope", strict=False).keys() == []
    with pytest.raises(KeyError):
        spec.select("nope")
    exc = spec.exclude("action", ("next", "reward"), "absent")
    assert "action" not in exc and ("next", "reward") not in exc and ("next", "done") in exc
    assert ("next", "reward") in spec
    assert spec.empty().keys() == [] and spec.empty().shape == spec.shape
    assert Composite(a=Composite()).is_empty() and not spec.is_empty()
    assert spec.pop("action") == OneHot(2, shape=(3, 2)) and "action" not in spec
    assert spec.pop("action", None) is None


def test_device_moves_leaves_and_to_clone():
    spec = Composite(obs=Unbounded(shape=(2,)), device="cpu")
    assert spec.device == torch.device("cpu") and spec["obs"].device == torch.device("cpu")
    assert spec.to("cpu") == spec and spec.clone() == spec and spec.clone() is not spec
    assert spec.zero().device == torch.device("cpu")
    assert Composite(obs=Unbounded(shape=(2,))).device is None
    assert spec.to(torch.float64)["obs"].dtype == torch.float64


def test_batch_size_alias_and_errors():
    assert Composite(batch_size=(2,)).shape == torch.Size([2])
    with pytest.raises(ValueError, match="differ"):
        Composite(shape=(2,), batch_size=(3,))
    with pytest.raises(TypeError, match="at most one"):
        Composite({}, {})


def test_non_tensor_leaf():
    spec = Composite(
        text=NonTensor(shape=(2,), example_data="hi"), obs=Unbounded(shape=(2, 1)), shape=(2,)
    )
    td = spec.zero()
    assert td["text"] == "hi" and spec.is_in(td)


def test_repr_is_nested_and_readable():
    text = repr(make())
    assert text.startswith("Composite(\n    observation: BoundedContinuous(")
    assert "    next: Composite(\n        reward: UnboundedContinuous(" in text
    assert text.endswith("device=None,\n    shape=torch.Size([3]))")
    assert "locked=True" in repr(make().lock_())
