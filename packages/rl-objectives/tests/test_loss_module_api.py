"""LossModule's subclassing API (TorchRL's): convert_to_functional(expand_dim=, compare_against=),
get/from_stateful_net, register_coeff_buffer and scheduled coefficients, loss_mask_key."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from rl_objectives import AUTO_LOSS_MASK_KEYS, LossModule


class Toy(LossModule):
    def forward(self, td):
        return TensorDict({"loss_x": self._reduce_loss(td.get("x"), td)}, [])


def _shared_pair():
    shared = nn.Linear(3, 4)
    a = TensorDictModule(nn.Sequential(shared, nn.Linear(4, 4)), in_keys=["a"], out_keys=["c"])
    b = TensorDictModule(nn.Sequential(shared, nn.Linear(4, 4)), in_keys=["b"], out_keys=["c"])
    return a, b


@pytest.mark.parametrize("expand_dim", [None, 3])
@pytest.mark.parametrize("compare", [True, False])
def test_convert_to_functional_expands_and_detaches_shared_params(expand_dim, compare):
    a, b = _shared_pair()
    loss = Toy()
    loss.convert_to_functional(a, "module_a")
    loss.convert_to_functional(
        b, "module_b", expand_dim=expand_dim, compare_against=a.parameters() if compare else []
    )
    flat = loss.module_b_params.flatten_keys()
    for key in ("module.0.weight", "module.0.bias"):
        assert flat[key].requires_grad is not compare
    for key in ("module.1.weight", "module.1.bias"):
        assert flat[key].requires_grad
        if expand_dim:
            assert flat[key].shape[0] == expand_dim
    # the shared layer trains once: through module_a only
    trainable = {id(p) for p in loss.parameters()}
    assert (id(a.module[0].weight) in trainable) and len(trainable) == (6 if compare else 8) - (
        0 if expand_dim else 2
    ) * (not compare)


def test_expanded_copies_are_drawn_within_the_original_range():
    net = nn.Linear(50, 50)
    with torch.no_grad():
        net.weight.uniform_(2.0, 3.0)  # a custom initialisation the copies must keep
    loss = Toy()
    loss.convert_to_functional(
        TensorDictModule(net, in_keys=["x"], out_keys=["y"]), "critic", expand_dim=4
    )
    w = loss.critic_params["module", "weight"]
    assert w.shape == (4, 50, 50)
    assert w.min() >= 2.0 and w.max() <= 3.0
    assert not torch.equal(w[0], w[1])  # independent copies


def test_module_list_must_match_expand_dim_and_is_stacked():
    nets = [TensorDictModule(nn.Linear(2, 2), in_keys=["x"], out_keys=["y"]) for _ in range(2)]
    loss = Toy()
    with pytest.raises(RuntimeError, match="must match the length"):
        loss.convert_to_functional(nets, "q", expand_dim=3)
    loss.convert_to_functional(nets, "q", expand_dim=2)
    torch.testing.assert_close(loss.q_params["module", "weight"][1], nets[1].module.weight)


def test_stateful_net_shares_tensors_and_writes_back():
    a, _ = _shared_pair()
    loss = Toy()
    loss.convert_to_functional(a, "module_a")
    assert loss.get_stateful_net("module_a", copy=False) is loss.module_a
    copy = loss.get_stateful_net("module_a")
    assert copy is not loss.module_a
    with torch.no_grad():
        for p in copy.parameters():
            p.zero_()
    assert (loss.module_a_params == 0).all()
    for mod in copy.modules():
        if isinstance(mod, nn.Linear):
            mod.weight = nn.Parameter(mod.weight.data + 1)
            mod.bias = nn.Parameter(mod.bias.data + 1)
    assert (loss.module_a_params == 0).all()
    loss.from_stateful_net("module_a", copy)
    assert (loss.module_a_params == 1).all()


def test_register_coeff_buffer_and_scheduling():
    loss = Toy()
    loss.register_coeff_buffer("entropy_coeff", 0.01)
    assert "entropy_coeff" in dict(loss.named_buffers())
    loss.register_coeff_buffer("c64", 1.0, dtype=torch.float64)
    assert loss.c64.dtype == torch.float64
    loss.entropy_coeff = 0.5  # scheduled: still the same buffer, in state_dict
    assert loss.entropy_coeff.item() == pytest.approx(0.5)
    assert "entropy_coeff" in loss.state_dict()
    loss.register_coeff_buffer("critic_coeff", None)
    assert loss.critic_coeff is None and "critic_coeff" not in dict(loss.named_buffers())
    for bad in (True, torch.ones(2)):
        with pytest.raises(ValueError, match="must be a float or a scalar tensor"):
            loss.register_coeff_buffer("bad", bad)


def _td(x, **masks):
    td = TensorDict({"x": x}, [x.shape[0]])
    for key, value in masks.items():
        td.set(("collector", "mask") if key == "collector" else key, value)
    return td


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_mask_auto_selects_out_masked_positions(reduction):
    base = torch.ones(4, requires_grad=True)
    x = base + torch.tensor([0.0, 0.0, float("nan"), float("inf")])
    valid = torch.tensor([True, True, False, False])
    loss = Toy(reduction=reduction)
    assert loss.loss_mask_key == "auto"
    assert AUTO_LOSS_MASK_KEYS == (("collector", "mask"), "shifted_valid")
    out = loss(_td(x, collector=valid.unsqueeze(-1)))["loss_x"]
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(base.grad).all()
    assert torch.equal(base.grad[~valid], torch.zeros(2))  # masked: no gradient at all


def test_loss_mask_keys_and_and_explicit_key_and_none():
    x = torch.arange(4.0)
    collector = torch.tensor([True, True, False, False])
    shifted = torch.tensor([True, False, True, False])
    loss = Toy(reduction="sum")
    assert loss(_td(x, collector=collector, shifted_valid=shifted))["loss_x"] == 0.0
    loss.loss_mask_key = "shifted_valid"
    assert loss(_td(x, collector=collector, shifted_valid=shifted))["loss_x"] == 2.0
    loss.loss_mask_key = None
    assert loss(_td(x, collector=collector))["loss_x"] == 6.0
    for bad in (0, 1.5, (), ("mask", 0)):
        with pytest.raises(ValueError, match="loss_mask_key"):
            loss.loss_mask_key = bad
    assert loss.loss_mask_key is None


def test_caller_mask_compacts_with_reduction_none_and_extra_dims_raise():
    loss = Toy(reduction="none")
    x = torch.arange(4.0)
    mask = torch.tensor([True, False, True, False])
    assert loss._reduce_loss(x, None, mask=mask).tolist() == [0.0, 2.0]
    with pytest.raises(ValueError, match="more non-singleton dimensions"):
        loss._reduce_loss(torch.ones(2, 3), None, mask=torch.ones(2, 3, 4, dtype=torch.bool))
