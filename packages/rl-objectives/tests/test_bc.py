"""BCLoss against plain torch: MSE / L1, Gaussian NLL, categorical cross-entropy; masks, keys, errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as Fn
from objectives_testlib import N_ACT, make_categorical_actor, make_normal_actor, transitions
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import distributions as D

from rl_objectives import BCLoss


def _det_actor(out_key="action"):
    return TensorDictModule(torch.nn.Linear(3, 2), ["observation"], [out_key])


@pytest.mark.parametrize(
    ("loss_function", "ref"),
    [("l2", lambda p, a: (p - a) ** 2), ("mse", lambda p, a: (p - a) ** 2),
     ("l1", lambda p, a: (p - a).abs()), ("smooth_l1", Fn.smooth_l1_loss), (None, None)],
)  # fmt: skip
def test_bc_regression_matches_plain_torch(loss_function, ref):
    actor = _det_actor()
    td = transitions(16)
    out = BCLoss(actor, loss_function=loss_function)(td)
    pred = actor.module(td["observation"])
    if ref is None:  # no loss_function, deterministic actor, float actions: squared error
        expected = ((pred - td["action"]) ** 2).mean()
    elif loss_function == "smooth_l1":
        expected = Fn.smooth_l1_loss(pred, td["action"])
    else:
        expected = ref(pred, td["action"]).mean()
    torch.testing.assert_close(out["loss_bc"], expected)
    (g,) = torch.autograd.grad(out["loss_bc"], [actor.module.weight])
    (g_ref,) = torch.autograd.grad(expected, [actor.module.weight])
    torch.testing.assert_close(g, g_ref)


def test_bc_gaussian_nll_matches_plain_torch():
    actor = make_normal_actor()
    td = transitions(16)
    out = BCLoss(actor)(td)
    loc, scale = actor.module[0].module(td["observation"])
    expected = -D.Normal(loc, scale).log_prob(td["action"]).sum(-1).mean()
    torch.testing.assert_close(out["loss_bc"], expected)
    assert out["loss_bc"].requires_grad


def test_bc_discrete_cross_entropy_matches_plain_torch():
    # a categorical policy: -log pi(a|s) is the cross-entropy of its logits
    actor = make_categorical_actor()
    td = transitions(16, action="categorical")
    logits = actor.module[0].module(td["observation"])
    expected = Fn.cross_entropy(logits, td["action"])
    torch.testing.assert_close(BCLoss(actor)(td)["loss_bc"], expected)
    # a network writing logits at the action key, integer expert actions
    net = TensorDictModule(torch.nn.Linear(3, N_ACT), ["observation"], ["action"])
    expected = Fn.cross_entropy(net.module(td["observation"]), td["action"])
    torch.testing.assert_close(BCLoss(net)(td)["loss_bc"], expected)
    torch.testing.assert_close(BCLoss(net, loss_function="cross_entropy")(td)["loss_bc"], expected)
    td2 = td.clone()
    td2["action"] = td["action"].unsqueeze(-1)  # [B, 1] indices
    torch.testing.assert_close(BCLoss(net)(td2)["loss_bc"], expected)


def test_bc_masks_and_reduction():
    actor = _det_actor()
    obs, act = torch.randn(4, 3), torch.randn(4, 2)
    act[3] = 1e6
    td = TensorDict(observation=obs, action=act, batch_size=[4])
    td["is_pad"] = torch.tensor([False, False, False, True])
    loss = BCLoss(actor, loss_function="l1").set_keys(pad_mask="is_pad")
    assert "is_pad" in loss.in_keys
    real = BCLoss(actor, loss_function="l1")(td[:3].exclude("is_pad"))["loss_bc"]
    torch.testing.assert_close(loss(td)["loss_bc"], real)
    loss.set_keys(pad_mask=None)
    assert "is_pad" not in loss.in_keys and loss(td)["loss_bc"] > 1e4
    # the collector's mask (False = padding), on by default, can be switched off
    td = TensorDict(observation=obs, action=act, batch_size=[4])
    td["collector", "mask"] = torch.tensor([True, True, True, False])
    loss = BCLoss(actor, loss_function="l1")
    torch.testing.assert_close(loss(td)["loss_bc"], real)
    loss.loss_mask_key = None
    assert loss(td)["loss_bc"] > 1e4
    none = BCLoss(actor, loss_function="l1", reduction="none")
    assert none(td)["loss_bc"].shape == (6,)  # the kept elements, flat
    assert none(td.exclude("collector"))["loss_bc"].shape == (4, 2)
    total = BCLoss(actor, loss_function="l1", reduction="sum")(td)["loss_bc"]
    torch.testing.assert_close(total, real * 6)


def test_bc_errors():
    td = TensorDict(observation=torch.randn(2, 3), expert=torch.randn(2, 2), batch_size=[2])
    loss = BCLoss(_det_actor("prediction")).set_keys(action="expert")
    with pytest.raises(RuntimeError, match="did not write a prediction at 'expert'"):
        loss(td)
    loss = BCLoss(_det_actor(), loss_function="l2").set_keys(action="expert")
    with pytest.warns(FutureWarning, match="hardcoded 'action' key"):
        assert loss(td)["loss_bc"].requires_grad
    with pytest.raises(ValueError, match="unsupported loss_function"):
        BCLoss(_det_actor(), loss_function="hinge")
    loss = BCLoss(_det_actor(), loss_function="l1").set_keys(pad_mask="pad")
    td = TensorDict(observation=torch.randn(2, 3), action=torch.randn(2, 2), batch_size=[2])
    td["pad"] = torch.zeros(2, 2, 2, dtype=torch.bool)
    with pytest.raises(RuntimeError, match="more dimensions"):
        loss(td)
    td = TensorDict(observation=torch.randn(2, 3), action=torch.randn(2, 3), batch_size=[2])
    with pytest.raises(ValueError, match="they must match"):
        BCLoss(_det_actor(), loss_function="l2")(td)
    with pytest.raises(KeyError, match="'action' key"):
        BCLoss(_det_actor())(td.exclude("action"))
