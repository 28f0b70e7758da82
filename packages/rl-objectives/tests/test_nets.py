"""The network-call helpers: direct distribution construction and parameter swaps."""

from __future__ import annotations

import pytest
import torch
from objectives_testlib import make_categorical_actor, make_normal_actor, make_tanh_actor
from tensordict import TensorDict
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import distributions as D

from rl_objectives._nets import BoundParams, dist_of, with_params


def _obs(n: int = 5) -> TensorDict:
    return TensorDict(observation=torch.randn(n, 3), batch_size=[n])


@pytest.mark.parametrize("make_actor", [make_tanh_actor, make_normal_actor, make_categorical_actor])
def test_dist_of_matches_get_dist(make_actor):
    actor, td = make_actor(), _obs()
    ours, ref = dist_of(actor, td), actor.get_dist(td)
    assert type(ours) is type(ref)
    x = ref.sample()
    torch.testing.assert_close(ours.log_prob(x), ref.log_prob(x))


def test_dist_of_passes_distribution_kwargs():
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["logits"]),
        ProbabilisticTensorDictModule(
            ["logits"], ["action"], distribution_class=D.Categorical,
            distribution_kwargs={"validate_args": False},
        ),
    )  # fmt: skip
    dist = dist_of(actor, _obs())
    assert isinstance(dist, D.Categorical) and not dist._validate_args


def test_dist_of_wrong_keywords_raise_get_dist_message():
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(torch.nn.Linear(3, 4), ["observation"], ["loc"]),
        ProbabilisticTensorDictModule(["loc"], ["action"], distribution_class=D.Categorical),
    )
    with pytest.raises(TypeError, match="dist_keys"):
        dist_of(actor, _obs())


@pytest.mark.parametrize("bound", [False, True])
def test_with_params_swaps_in_and_restores(bound):
    net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    originals = dict([*net.named_parameters(), *net.named_buffers()])
    zeros = TensorDict.from_module(net).data.clone().apply(torch.zeros_like)
    params = BoundParams(zeros, net) if bound else zeros
    x = torch.randn(4, 3)
    with with_params(params, net):
        assert net[0].weight is zeros["0", "weight"]
        assert net[1].running_var is zeros["1", "running_var"]
        assert torch.equal(net[0](x), torch.zeros(4, 2))
    with pytest.raises(RuntimeError, match="boom"), with_params(params, net):
        raise RuntimeError("boom")
    now = dict([*net.named_parameters(), *net.named_buffers()])
    assert all(now[k] is v for k, v in originals.items())
