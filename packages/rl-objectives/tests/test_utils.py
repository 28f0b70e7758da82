"""``distance_loss``: element-wise distances and fused reductions."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as Fn

from rl_objectives import distance_loss


@pytest.mark.parametrize(
    ("name", "ref"),
    [("l2", lambda d: d**2), ("l1", torch.abs), ("smooth_l1", lambda d: Fn.smooth_l1_loss(d, torch.zeros_like(d), reduction="none"))],
)  # fmt: skip
def test_distance_loss_and_its_reductions(name, ref):
    a, b = torch.randn(6, 2), torch.randn(6, 2)
    element = ref(a - b)
    torch.testing.assert_close(distance_loss(a, b, name), element)
    torch.testing.assert_close(distance_loss(a, b, name, reduction="mean"), element.mean())
    torch.testing.assert_close(distance_loss(a, b, name, reduction="sum"), element.sum())


def test_distance_loss_rejects_mismatched_shapes_and_unknown_names():
    with pytest.raises(ValueError, match="must match"):
        distance_loss(torch.zeros(3), torch.zeros(3, 1), "l2")
    with pytest.raises(ValueError, match="loss_function"):
        distance_loss(torch.zeros(3), torch.zeros(3), "huber")


def test_updaters_sync_at_construction_and_step_only_trainable_entries():
    from tensordict.nn import TensorDictModule
    from torch import nn

    from rl_objectives import DQNLoss, HardUpdate, SoftUpdate

    net = TensorDictModule(
        nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)),
        ["observation"],
        ["action_value"],
    )
    loss = DQNLoss(net, action_space="categorical", delay_value=True)
    target = loss.target_value_network_params.flatten_keys()
    with torch.no_grad():
        net.module[1].running_mean.add_(3.0)
        net.module[0].weight.add_(1.0)
    soft = SoftUpdate(loss, eps=0.5)  # construction copies everything, buffers included
    torch.testing.assert_close(target["module.1.running_mean"], net.module[1].running_mean)
    with torch.no_grad():
        net.module[1].running_mean.add_(3.0)
        net.module[0].weight.add_(2.0)
    w_before = target["module.0.weight"].clone()
    soft.step()
    torch.testing.assert_close(
        target["module.0.weight"], 0.5 * w_before + 0.5 * net.module[0].weight.data
    )
    # buffers (no gradient) are left alone by step(), as in TorchRL
    torch.testing.assert_close(target["module.1.running_mean"], torch.full((4,), 3.0))
    hard = HardUpdate(loss, value_network_update_interval=0)
    with torch.no_grad():
        net.module[0].weight.add_(1.0)
    hard.step()  # interval 0: every step copies
    torch.testing.assert_close(target["module.0.weight"], net.module[0].weight.data)
    assert hard.state_dict() == {"initialized": True, "counter": 0}
    with pytest.warns(UserWarning, match="already initialized"):
        hard.init_()
