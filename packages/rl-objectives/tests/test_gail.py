"""GAILLoss against plain torch: BCE on expert / policy pairs, gradient penalty, keys, errors."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from rl_objectives import GAILLoss


class Disc(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, obs, act):
        return torch.sigmoid(self.net(torch.cat([obs, act], -1)))


def _data(b=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return TensorDict(
        observation=torch.randn(b, 3, generator=g), action=torch.randn(b, 2, generator=g),
        collector_observation=torch.randn(b, 3, generator=g) + 1.0,
        collector_action=torch.randn(b, 2, generator=g), batch_size=[b],
    )  # fmt: skip


@pytest.mark.parametrize("use_grad_penalty", [False, True])
def test_gail_matches_plain_torch_values_and_gradients(use_grad_penalty):
    disc = Disc()
    loss = GAILLoss(
        TensorDictModule(disc, ["observation", "action"], ["d_logits"]),
        use_grad_penalty=use_grad_penalty,
        gp_lambda=5.0,
    )
    td = _data()
    torch.manual_seed(0)
    out = loss(td)
    torch.manual_seed(0)
    oe, ae, oc, ac = (
        td["observation"],
        td["action"],
        td["collector_observation"],
        td["collector_action"],
    )
    d_e, d_c = disc(oe, ae), disc(oc, ac)
    ref = -(torch.log(d_e) + torch.log(1 - d_c))  # BCE with labels 1 and 0
    if use_grad_penalty:
        eps = torch.rand(16, 1)
        om = (eps * oc + (1 - eps) * oe).requires_grad_(True)
        am = (eps * ac + (1 - eps) * ae).requires_grad_(True)
        go, ga = torch.autograd.grad(disc(om, am).sum(), (om, am), create_graph=True)
        gp = 5.0 * ((torch.cat([go, ga], -1).norm(dim=-1) - 1) ** 2).mean()
        torch.testing.assert_close(out["gp_loss"], gp.detach())
        ref = ref + gp
    ref = ref.mean()
    torch.testing.assert_close(out["loss"], ref)
    ours = torch.autograd.grad(out["loss"], list(disc.parameters()))
    theirs = torch.autograd.grad(ref, list(disc.parameters()))
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b)
    assert loss.out_keys == (["loss", "gp_loss"] if use_grad_penalty else ["loss"])


def test_gail_custom_keys_and_errors():
    disc = TensorDictModule(Disc(), ["obs", "act"], ["p"])
    loss = GAILLoss(disc).set_keys(
        expert_observation="obs", expert_action="act", collector_observation="pobs",
        collector_action="pact", discriminator_pred="p",
    )  # fmt: skip
    td = _data().rename_key_("observation", "obs").rename_key_("action", "act")
    td.rename_key_("collector_observation", "pobs").rename_key_("collector_action", "pact")
    assert loss(td)["loss"].shape == ()
    with pytest.raises(KeyError, match="'collector_action' key"):
        GAILLoss(TensorDictModule(Disc(), ["observation", "action"], ["d_logits"]))(
            _data().exclude("collector_action")
        )
    td = _data()
    td["collector_action"] = torch.randn(16, 3)
    with pytest.raises(ValueError, match="same shape"):
        GAILLoss(TensorDictModule(Disc(), ["observation", "action"], ["d_logits"]))(td)

    class Two(Disc):
        def forward(self, obs, act):
            return torch.sigmoid(torch.cat([obs, act], -1)[..., :2])

    two = TensorDictModule(Two(), ["observation", "action"], ["d_logits"])
    with pytest.raises(ValueError, match="expected \\(32, 1\\)"):
        GAILLoss(two)(_data())


def test_gail_in_keys_follow_set_keys_and_feed_the_call_with_tensors():
    loss = GAILLoss(TensorDictModule(Disc(), ["obs", "act"], ["d_logits"]))
    loss.set_keys(expert_observation="obs", expert_action="act")
    assert loss.in_keys == ["act", "obs", "collector_action", "collector_observation"]
    td = _data().rename_key_("observation", "obs").rename_key_("action", "act")
    kwargs = {key: td[key] for key in loss.in_keys}
    torch.testing.assert_close(loss(**kwargs), loss(td)["loss"])
