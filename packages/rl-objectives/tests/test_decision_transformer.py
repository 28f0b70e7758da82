"""DTLoss and OnlineDTLoss against plain torch on fixed windows; keys, shapes and errors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as Fn
from tensordict import TensorDict
from tensordict.nn import (
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import distributions as D
from torch import nn

from rl_objectives import DTLoss, OnlineDTLoss

B, T, S, A = 4, 5, 3, 2


def windows(seed: int = 0) -> TensorDict:
    g = torch.Generator().manual_seed(seed)
    return TensorDict(
        observation=torch.randn(B, T, S, generator=g),
        action=torch.rand(B, T, A, generator=g) * 1.6 - 0.8,
        return_to_go=torch.randn(B, T, 1, generator=g),
        batch_size=[B],
    )


class SeqNet(nn.Module):
    """A stand-in for DTActor: reads (observation, action, return_to_go) windows."""

    def __init__(self, out: int = A) -> None:
        super().__init__()
        self.lin = nn.Linear(S + A + 1, out)

    def forward(self, obs, act, rtg):
        return self.lin(torch.cat([obs, act, rtg], -1))


KEYS = ["observation", "action", "return_to_go"]


@pytest.mark.parametrize("loss_function", ["l2", "l1", "smooth_l1"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_dt_loss_matches_plain_torch(loss_function, reduction):
    torch.manual_seed(0)
    net = SeqNet()
    td = windows()
    out = DTLoss(TensorDictModule(net, KEYS, ["action"]), loss_function=loss_function,
                 reduction=reduction)(td)  # fmt: skip
    pred = net(td["observation"], td["action"], td["return_to_go"])
    diff = pred - td["action"]
    elem = {"l2": diff**2, "l1": diff.abs(),
            "smooth_l1": torch.where(diff.abs() < 1, 0.5 * diff**2, diff.abs() - 0.5)}[loss_function]  # fmt: skip
    expected = {"mean": elem.mean(), "sum": elem.sum(), "none": elem}[reduction]
    torch.testing.assert_close(out["loss"], expected)
    assert td["action"].shape == (B, T, A)  # the data's actions are not overwritten
    if reduction != "none":
        (g,) = torch.autograd.grad(out["loss"], [net.lin.weight])
        (g_ref,) = torch.autograd.grad(expected, [net.lin.weight])
        torch.testing.assert_close(g, g_ref)


def test_dt_loss_keys_and_errors():
    net = SeqNet()
    loss = DTLoss(TensorDictModule(net, KEYS, ["pred"])).set_keys(action_pred="pred")
    td = windows()
    torch.testing.assert_close(
        loss(td)["loss"], Fn.mse_loss(net(td["observation"], td["action"], td["return_to_go"]),
                                      td["action"])
    )  # fmt: skip
    assert loss.in_keys == KEYS
    td2 = windows().rename_key_("action", "expert")
    td2["action"] = td2["expert"] * 0
    loss.set_keys(action_target="expert")
    torch.testing.assert_close(loss(td2)["loss"], Fn.mse_loss(
        net(td2["observation"], td2["action"], td2["return_to_go"]), td2["expert"]))  # fmt: skip
    with pytest.raises(KeyError, match=r"expected the entry 'expert'.*set_keys\(action_target="):
        loss(windows())
    bad = DTLoss(TensorDictModule(SeqNet(out=3), KEYS, ["action"]))
    with pytest.raises(
        ValueError, match=r"has shape \(4, 5, 3\) but the target 'action' has \(4, 5, 2\)"
    ):
        bad(windows())
    with pytest.raises(ValueError, match="loss_function must be one of"):
        DTLoss(TensorDictModule(net, KEYS, ["action"]), loss_function="huber")
    grad_td = windows()
    grad_td["action"] = grad_td["action"].requires_grad_()
    with pytest.raises(RuntimeError, match="part of an autograd graph"):
        DTLoss(TensorDictModule(net, KEYS, ["action"]))(grad_td)


class TanhNormal(D.TransformedDistribution):
    def __init__(self, loc, scale):
        super().__init__(D.Independent(D.Normal(loc, scale), 1), [D.TanhTransform(cache_size=1)])


def normal(loc, scale):
    return D.Independent(D.Normal(loc, scale), 1)


class GaussianSeqNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net, self.extract = SeqNet(out=2 * A), NormalParamExtractor()

    def forward(self, obs, act, rtg):
        return self.extract(self.net(obs, act, rtg))


def odt_actor(dist_class=normal):
    body = GaussianSeqNet()
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(body, KEYS, ["loc", "scale"]),
        ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=dist_class),
    )
    return actor, body


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_online_dt_loss_matches_plain_torch(reduction):
    torch.manual_seed(0)
    actor, body = odt_actor()
    loss = OnlineDTLoss(actor, alpha_init=0.5, samples_mc_entropy=3, reduction=reduction)
    td = windows()
    torch.manual_seed(7)
    out = loss(td)
    # reference: closed-form Gaussian log-densities, the same noise drawn by hand
    loc, scale = body(td["observation"], td["action"], td["return_to_go"])
    torch.manual_seed(7)
    eps = torch.randn(3, B, T, A)
    log_norm = -0.5 * math.log(2 * math.pi)
    ll = (log_norm - scale.log() - 0.5 * ((td["action"] - loc) / scale) ** 2).sum(-1)
    entropy = -(log_norm - scale.log() - 0.5 * eps**2).sum(-1).mean(0)
    red = torch.mean if reduction == "mean" else torch.sum
    target_entropy = -float(A)  # "auto": the action's last dim
    torch.testing.assert_close(out["loss_log_likelihood"], red(-ll))
    torch.testing.assert_close(out["loss_entropy"], red(-0.5 * entropy))
    torch.testing.assert_close(out["loss_alpha"], red(0.5 * (entropy - target_entropy)))
    torch.testing.assert_close(out["entropy"], entropy.mean())
    torch.testing.assert_close(out["alpha"], torch.tensor(0.5))
    assert loss.target_entropy == target_entropy
    # loss_alpha moves only log_alpha: d/dlog_alpha = alpha * (H - target)
    (g,) = torch.autograd.grad(out["loss_alpha"], [loss.log_alpha])
    torch.testing.assert_close(g, red(0.5 * (entropy - target_entropy)))
    params = list(body.parameters())
    g_ent = torch.autograd.grad(out["loss_entropy"], params)
    g_ref = torch.autograd.grad(red(-0.5 * entropy), params)
    for a, b in zip(g_ent, g_ref, strict=True):
        torch.testing.assert_close(a, b)


def test_online_dt_loss_tanh_normal_and_options():
    torch.manual_seed(0)
    actor, body = odt_actor(TanhNormal)
    td = windows()
    loss = OnlineDTLoss(actor, target_entropy=-1.0, reduction="none", fixed_alpha=True)
    out = loss(td)
    loc, scale = body(td["observation"], td["action"], td["return_to_go"])
    # log pi(a) of the squashed Gaussian: Gaussian log-density of atanh(a) minus log|d tanh|
    u = torch.atanh(td["action"])
    ll = (D.Normal(loc, scale).log_prob(u) - torch.log1p(-(td["action"] ** 2))).sum(-1)
    torch.testing.assert_close(out["loss_log_likelihood"], -ll, atol=1e-4, rtol=1e-4)
    assert out["loss_entropy"].shape == (B, T) and out["alpha"].shape == ()
    assert "log_alpha" not in dict(loss.named_parameters())
    excl = OnlineDTLoss(actor, target_entropy=-1.0, scalar_output_mode="exclude")
    assert sorted(excl(td).keys()) == ["loss_alpha", "loss_entropy", "loss_log_likelihood"]
    assert excl.out_keys == ["loss_log_likelihood", "loss_entropy", "loss_alpha"]
    clamped = OnlineDTLoss(actor, alpha_init=1.0, min_alpha=0.01, max_alpha=0.2)
    torch.testing.assert_close(clamped.alpha, torch.tensor(0.2))


def test_online_dt_loss_errors():
    actor, _ = odt_actor()
    with pytest.raises(ValueError, match="scalar_output_mode must be"):
        OnlineDTLoss(actor, scalar_output_mode="drop")
    with pytest.raises(ValueError, match="samples_mc_entropy must be >= 1"):
        OnlineDTLoss(actor, samples_mc_entropy=0)
    with pytest.raises(ValueError, match=r"the target action must have the shape"):
        OnlineDTLoss(actor, target_entropy=-2.0).set_keys(action_target="expert")(
            windows().set("expert", torch.zeros(B, T, A + 1))
        )
