"""ACTLoss against plain torch (L1 / MSE chunk reconstruction, closed-form KL via torch.distributions)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import distributions as D
from torch import nn

from rl_objectives import ACTLoss
from rl_objectives.act import gaussian_kl_to_standard

B, OBS, K, A, Z = 6, 5, 4, 2, 3


class TinyCVAE(nn.Module):
    """A stand-in for ACTModel: linear encoder to (mu, log_var), linear decoder from (obs, mu)."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(OBS + K * A, 2 * Z)
        self.dec = nn.Linear(OBS + Z, K * A)

    def forward(self, obs, chunk):
        mu, log_var = self.enc(torch.cat([obs, chunk.flatten(-2)], -1)).chunk(2, -1)
        pred = self.dec(torch.cat([obs, mu], -1)).unflatten(-1, (K, A))
        return pred, mu, log_var


def batch(seed: int = 0) -> TensorDict:
    g = torch.Generator().manual_seed(seed)
    return TensorDict({"observation": torch.randn(B, OBS, generator=g),
                       ("vla_action", "chunk"): torch.randn(B, K, A, generator=g)}, batch_size=[B])  # fmt: skip


def actor(net: nn.Module) -> TensorDictModule:
    return TensorDictModule(net, ["observation", "action_chunk"], ["action_pred", "mu", "log_var"])


def reference(net, td, loss_function, kl_weight, reduction):
    chunk = td["vla_action", "chunk"]
    pred, mu, log_var = net(td["observation"], chunk)
    diff = pred - chunk
    elem = diff.abs() if loss_function == "l1" else diff**2
    recon = elem.mean((-2, -1))
    kl = D.kl_divergence(D.Normal(mu, (0.5 * log_var).exp()), D.Normal(0.0, 1.0)).sum(-1)
    red = {"mean": torch.mean, "sum": torch.sum, "none": lambda x: x}[reduction]
    return red(recon) + kl_weight * red(kl), red(recon), red(kl)


@pytest.mark.parametrize("loss_function", ["l1", "l2"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_act_loss_matches_plain_torch(loss_function, reduction):
    torch.manual_seed(0)
    net = TinyCVAE()
    td = batch()
    out = ACTLoss(actor(net), kl_weight=3.0, loss_function=loss_function, reduction=reduction)(td)
    total, recon, kl = reference(net, td, loss_function, 3.0, reduction)
    torch.testing.assert_close(out["loss_act"], total)
    torch.testing.assert_close(out["loss_reconstruction"], recon)
    torch.testing.assert_close(out["loss_kl"], kl)
    assert not out["loss_reconstruction"].requires_grad and not out["loss_kl"].requires_grad
    if reduction != "none":
        params = list(net.parameters())
        for a, b in zip(torch.autograd.grad(out["loss_act"], params),
                        torch.autograd.grad(total, params), strict=True):  # fmt: skip
            torch.testing.assert_close(a, b)
    else:
        assert out["loss_act"].shape == (B,)


def test_kl_closed_form():
    mu, log_var = torch.randn(4, 3), torch.randn(4, 3)
    ref = D.kl_divergence(D.Normal(mu, (0.5 * log_var).exp()), D.Normal(0.0, 1.0)).sum(-1)
    torch.testing.assert_close(gaussian_kl_to_standard(mu, log_var), ref)


def test_act_loss_keys_and_errors():
    net = TinyCVAE()
    td = batch().rename_key_(("vla_action", "chunk"), "expert").rename_key_("observation", "obs")
    loss = ACTLoss(actor(net), kl_weight=1.0).set_keys(observation="obs", action_chunk="expert")
    assert loss.in_keys == ["obs", "expert"]
    ref = reference(net, batch(), "l1", 1.0, "mean")[0]
    torch.testing.assert_close(loss(td)["loss_act"], ref)
    with pytest.raises(KeyError, match=r"expected the entry 'obs'.*set_keys\(observation="):
        loss(batch())
    renamed = TensorDictModule(net, ["observation", "action_chunk"], ["pred", "mu", "log_var"])
    with pytest.raises(KeyError, match=r"did not write 'action_pred'.*set_keys\(action_pred="):
        ACTLoss(renamed)(batch())
    torch.testing.assert_close(ACTLoss(renamed, kl_weight=1.0).set_keys(action_pred="pred")(batch())[
        "loss_act"], reference(net, batch(), "l1", 1.0, "mean")[0])  # fmt: skip

    class Short(TinyCVAE):
        def forward(self, obs, chunk):
            pred, mu, log_var = super().forward(obs, chunk)
            return pred[:, :-1], mu, log_var

    with pytest.raises(ValueError, match=r"has shape \(6, 3, 2\) but the expert chunk"):
        ACTLoss(actor(Short()))(batch())
    with pytest.raises(ValueError, match="loss_function must be one of"):
        ACTLoss(actor(net), loss_function="huber")
