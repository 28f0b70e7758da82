"""check_weights / SharedWeights.push / load_weights_: validated first, then all or nothing."""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp
from tensordict import TensorDict
from torch import nn

from rl_collectors._policy import load_weights_
from rl_collectors._weight_check import check_weights, flat_weights
from rl_collectors._weights import SharedWeights


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))


def _good(net: nn.Module) -> dict[str, torch.Tensor]:
    return {
        k: v.detach().clone() + (1 if v.is_floating_point() else 0)
        for k, v in net.state_dict().items()
    }


BAD = {
    "missing": (
        lambda g: {k: v for k, v in g.items() if k != "0.bias"},
        r"missing keys \['0.bias'\]",
    ),
    "extra": (lambda g: {**g, "2.weight": torch.ones(1)}, r"unexpected keys \['2.weight'\]"),
    "broadcast": (
        lambda g: {**g, "0.weight": torch.ones(1, 1)},
        r"'0.weight' has shape \(1, 1\), expected \(4, 3\)",
    ),
    "int for float": (
        lambda g: {**g, "0.weight": g["0.weight"].long()},
        r"'0.weight' has dtype torch.int64",
    ),
    "float for int": (
        lambda g: {**g, "1.num_batches_tracked": torch.tensor(1.0)},
        r"'1.num_batches_tracked' has dtype torch.float32, expected torch.int64",
    ),
    "nan": (
        lambda g: {**g, "0.bias": torch.full((4,), float("nan"))},
        r"NaN or inf values in \['0.bias'\]",
    ),
    "not a tensor": (
        lambda g: {**g, "0.bias": [0.0] * 4},
        r"'0.bias' is a list, expected a tensor",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_shared_weights_refuse_bad_updates_and_keep_version_and_values(case: str) -> None:
    net = _net()
    shared = SharedWeights(net, mp.get_context("spawn"))
    before = shared.weights.clone()
    make, match = BAD[case]
    with pytest.raises(ValueError, match=match):
        shared.push(make(_good(net)))
    assert shared.version == 0
    assert (shared.weights == before).all()


def test_every_problem_is_listed_at_once() -> None:
    net = _net()
    given = {**_good(net), "0.weight": torch.ones(1), "extra": torch.ones(1)}
    del given["0.bias"]
    with pytest.raises(ValueError, match=r"missing keys.*unexpected keys.*'0.weight' has shape"):
        check_weights(flat_weights(net), given, "test")


def test_state_dict_needs_no_non_persistent_buffer_but_a_module_source_has_them() -> None:
    net = _net()
    net.register_buffer("scratch", torch.zeros(2), persistent=False)
    shared = SharedWeights(net, mp.get_context("spawn"))
    assert shared.push(_good(net)) == 1  # a state_dict has no "scratch": fine
    assert shared.push(net) == 2
    assert shared.push(TensorDict.from_module(net)) == 3


def test_floating_casts_are_allowed_like_load_state_dict() -> None:
    net = _net()
    shared = SharedWeights(net, mp.get_context("spawn"))
    good = _good(net)
    shared.push({k: v.double() if v.is_floating_point() else v for k, v in good.items()})
    assert shared.weights["0", "weight"].dtype == torch.float32
    assert torch.equal(shared.weights["0", "weight"], good["0.weight"])


def test_load_weights_checks_before_writing() -> None:
    net, source = _net(), _net()
    with torch.no_grad():
        source[0].weight.add_(1)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    bad = {**source.state_dict(), "0.bias": torch.ones(7)}
    with pytest.raises(ValueError, match=r"'0\.bias' has shape"):
        load_weights_(net, bad)
    for key, value in net.state_dict().items():
        assert torch.equal(value, before[key]), key  # the good weight was not written either
    load_weights_(net, source)
    assert torch.equal(net[0].weight, source[0].weight)
