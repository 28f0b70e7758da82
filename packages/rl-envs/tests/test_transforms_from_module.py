"""get_primers_from_module / get_env_transforms_from_module with local stateful modules."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rl_envs import (
    Compose,
    InitTracker,
    PendulumEnv,
    TensorDictPrimer,
    TransformedEnv,
    Unbounded,
    get_env_transforms_from_module,
    get_primers_from_module,
)


class Described(nn.Module):
    """Describes its state as a {key: spec-like} mapping (as rl_modules' recurrent modules do)."""

    def __init__(self, key: str, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.key, self.shape = key, shape

    def make_tensordict_primer(self):
        return {self.key: Unbounded(shape=self.shape)}


class WithPrimer(nn.Module):
    def make_tensordict_primer(self):
        return TensorDictPrimer(ready=Unbounded(shape=(2,)), default_value=3.0)


class Unconfigured(nn.Module):
    def make_tensordict_primer(self):
        raise RuntimeError("pass input_shape")


def test_no_primer_returns_none_and_warns():
    with pytest.warns(UserWarning, match="no sub-module"):
        assert get_primers_from_module(nn.Linear(2, 2)) is None
    assert get_primers_from_module(nn.Linear(2, 2), warn=False) is None


def test_one_primer_is_returned_as_is_and_a_mapping_is_built():
    primer = get_primers_from_module(nn.Sequential(nn.Linear(2, 2), Described("h", (1, 4))))
    assert isinstance(primer, TensorDictPrimer)
    assert list(primer.primers) == ["h"] and primer.primers["h"].shape == (1, 4)
    ready = WithPrimer()
    assert get_primers_from_module(nn.Sequential(ready)).primers.keys() == {"ready"}


def test_several_primers_compose_in_module_order():
    primers = get_primers_from_module(nn.Sequential(Described("a", (3,)), WithPrimer()))
    assert isinstance(primers, Compose) and len(primers) == 2
    assert list(primers[0].primers) == ["a"] and list(primers[1].primers) == ["ready"]


def test_strict_raises_and_non_strict_keeps_the_others():
    policy = nn.Sequential(Described("h", (2,)), Unconfigured())
    with pytest.raises(RuntimeError, match="input_shape"):
        get_primers_from_module(policy)
    with pytest.warns(UserWarning, match="Unconfigured: pass input_shape"):
        primer = get_primers_from_module(policy, strict=False)
    assert list(primer.primers) == ["h"]


def test_a_wrong_description_is_named():
    class Wrong(nn.Module):
        def make_tensordict_primer(self):
            return 3

    with pytest.raises(TypeError, match=r"Wrong.make_tensordict_primer\(\) returned a int"):
        get_primers_from_module(Wrong())


def test_env_transforms_tracker_then_primers():
    bare = get_env_transforms_from_module(nn.Linear(2, 2), init_key="first")
    assert isinstance(bare, InitTracker) and bare.init_key == "first"
    transforms = get_env_transforms_from_module(Described("h", (1, 4)))
    assert isinstance(transforms, Compose)
    assert [type(t) for t in transforms.transforms] == [InitTracker, TensorDictPrimer]
    env = TransformedEnv(PendulumEnv(batch_size=[3]), transforms)
    td = env.reset()
    assert td["is_init"].all()
    torch.testing.assert_close(td["h"], torch.zeros(3, 1, 4))
