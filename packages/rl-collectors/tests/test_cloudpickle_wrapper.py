"""CloudpickleWrapper: callables that plain pickle refuses, sent by value."""

import pickle

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_collectors import CloudpickleWrapper


def test_a_lambda_with_bound_kwargs_survives_pickling():
    scale = 3

    def local(x, k=1):
        return x * k + scale

    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(local)
    wrapped = pickle.loads(pickle.dumps(CloudpickleWrapper(local, k=2)))
    assert wrapped(5) == 13
    assert wrapped(5, k=10) == 13  # bound keywords win, as in TorchRL


def test_wrapping_twice_returns_the_same_wrapper_and_envcreator_is_refused():
    wrapped = CloudpickleWrapper(len)
    assert CloudpickleWrapper(wrapped) is wrapped

    class EnvCreator:
        def __call__(self):
            return None

    with pytest.raises(RuntimeError, match="EnvCreator"):
        CloudpickleWrapper(EnvCreator())


def test_a_module_gives_the_same_outputs_after_pickling():
    module = TensorDictModule(torch.nn.Linear(2, 1), in_keys=["x"], out_keys=["y"])
    wrapped = pickle.loads(pickle.dumps(CloudpickleWrapper(module)))
    td = TensorDict(x=torch.ones(3, 2), batch_size=[3])
    expected = module(td.clone())["y"]
    torch.testing.assert_close(wrapped(td)["y"], expected)
