"""``separate_losses`` on DDPG / TD3 / SAC with a trunk shared by the actor and the critic."""

from __future__ import annotations

import pytest
import torch
from objectives_testlib import ACT, OBS, TanhNormal, transitions
from tensordict.nn import (
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
)
from torch import nn

from rl_objectives import DDPGLoss, SACLoss, SoftUpdate, TD3Loss
from rl_objectives.td3 import action_bounds

HID = 5


class _Q(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(HID + ACT, 1)

    def forward(self, hidden, action):
        return self.lin(torch.cat([hidden, action], -1))


def _nets(stochastic: bool):
    trunk = TensorDictModule(nn.Linear(OBS, HID), ["observation"], ["hidden"])
    if stochastic:
        head = TensorDictModule(
            nn.Sequential(nn.Linear(HID, 2 * ACT), NormalParamExtractor()),
            ["hidden"],
            ["loc", "scale"],
        )
        actor = ProbabilisticTensorDictSequential(
            trunk,
            head,
            ProbabilisticTensorDictModule(
                ["loc", "scale"], ["action"], distribution_class=TanhNormal, return_log_prob=True
            ),
        )
    else:
        actor = TensorDictSequential(
            trunk, TensorDictModule(nn.Linear(HID, ACT), ["hidden"], ["action"])
        )
    critic = TensorDictSequential(
        trunk, TensorDictModule(_Q(), ["hidden", "action"], ["state_action_value"])
    )
    return trunk, actor, critic


def _build(kind: str, separate: bool):
    trunk, actor, critic = _nets(stochastic=kind == "sac")
    if kind == "ddpg":
        loss = DDPGLoss(actor, critic, separate_losses=separate)
        return trunk, loss, "loss_value", "value_network_params"
    if kind == "td3":
        loss = TD3Loss(
            actor, critic, bounds=(-1.0, 1.0), num_qvalue_nets=1, separate_losses=separate
        )
    else:
        loss = SACLoss(actor, critic, num_qvalue_nets=1, separate_losses=separate)
    return trunk, loss, "loss_qvalue", "qvalue_network_params"


@pytest.mark.parametrize("kind", ["ddpg", "td3", "sac"])
def test_separate_losses_keeps_the_shared_trunk_out_of_the_critic_loss(kind):
    trunk, loss, critic_key, params_name = _build(kind, separate=True)
    SoftUpdate(loss, eps=0.5)
    loss(transitions(8))[critic_key].backward()
    assert all(p.grad is None for p in trunk.parameters())  # the actor's trunk is untouched
    own = getattr(loss, params_name)
    grads = [p.grad for p in own.values(True, True)]
    assert grads[:2] == [None, None]  # the shared trunk shows detached, as in TorchRL
    assert all(g is not None and g.abs().sum() > 0 for g in grads[2:])


@pytest.mark.parametrize("kind", ["td3", "sac"])
def test_without_separate_losses_the_critics_own_a_copy_of_the_trunk(kind):
    trunk, loss, critic_key, params_name = _build(kind, separate=False)
    SoftUpdate(loss, eps=0.5)
    loss(transitions(8))[critic_key].backward()
    assert all(p.grad is None for p in trunk.parameters())
    grads = [p.grad for p in getattr(loss, params_name).values(True, True)]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)


def test_ddpg_without_separate_losses_trains_the_shared_trunk_with_the_value_loss():
    trunk, loss, _, _ = _build("ddpg", separate=False)
    SoftUpdate(loss, eps=0.5)
    loss(transitions(8))["loss_value"].backward()
    assert all(p.grad is not None for p in trunk.parameters())


def test_td3_bounds_from_an_actor_composite_spec_and_exactly_one_source():
    class Box:
        low, high = torch.full((ACT,), -2.0), torch.full((ACT,), 3.0)

    class Leaf:
        space = Box()

    class Composite(dict):
        shape = torch.Size([])

        def keys(self, include_nested=False, leaves_only=False):
            return list(super().keys())

    low, high = action_bounds(Composite(action=Leaf()), None)
    torch.testing.assert_close(low, Box.low)
    torch.testing.assert_close(high, Box.high)
    with pytest.raises(ValueError, match="but not both"):
        action_bounds(Leaf(), (-1.0, 1.0))
    with pytest.raises(ValueError, match="but not both"):
        action_bounds(None, None)
