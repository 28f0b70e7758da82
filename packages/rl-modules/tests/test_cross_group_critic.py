"""CrossGroupCritic against a hand-written forward pass, and its gradient routing."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torch.nn import functional as F

from rl_modules import CrossCriticGroupSpec, CrossGroupCritic

GROUPS = {
    "a": CrossCriticGroupSpec(3, 2, ("a", "obs"), ("a", "value")),
    "b": CrossCriticGroupSpec(5, 1, ("agents", "b", "obs"), ("agents", "b", "value")),
}


def _data(batch=(6,)) -> TensorDict:
    torch.manual_seed(1)
    return TensorDict(
        {
            "a": {"obs": torch.randn(*batch, 2, 3)},
            "agents": {"b": {"obs": torch.randn(*batch, 1, 5)}},
        },
        batch_size=list(batch),
    )


@pytest.mark.parametrize("share_params", [True, False])
def test_values_match_a_hand_written_forward(share_params):
    torch.manual_seed(0)
    critic = CrossGroupCritic(
        GROUPS, d_model=4, trunk_depth=1, trunk_cells=8, share_params=share_params
    )
    net = critic.module
    td = critic(_data())
    emb = [
        torch.tanh(
            F.linear(_data()[spec.obs_key], *(net.encoders[n][0].weight, net.encoders[n][0].bias))
        )
        for n, spec in GROUPS.items()
    ]
    joint = net.trunk(torch.cat(emb, -2).flatten(-2)).reshape(6, 3, 4)
    for name, part in zip(GROUPS, joint.split([2, 1], -2), strict=True):
        head = net.shared_head if share_params else net.group_heads[name]
        torch.testing.assert_close(
            td[GROUPS[name].value_key], F.linear(part, head.weight, head.bias)
        )


def test_values_depend_on_other_groups_and_detach_stops_gradients():
    data = _data()
    data["agents", "b", "obs"].requires_grad_(True)
    critic = CrossGroupCritic(GROUPS, d_model=4, trunk_cells=8)
    critic(data.clone())["a", "value"].sum().backward()
    assert data["agents", "b", "obs"].grad.abs().sum() > 0
    frozen = CrossGroupCritic(GROUPS, d_model=4, trunk_cells=8, detach_groups=["b"])
    obs_b = torch.randn(6, 1, 5, requires_grad=True)
    td = _data().set(("agents", "b", "obs"), obs_b)
    frozen(td)["a", "value"].sum().backward()
    assert obs_b.grad is None
    with pytest.raises(ValueError, match="unknown groups"):
        CrossGroupCritic(GROUPS, detach_groups=["c"])
    with pytest.raises(ValueError, match="n_agents=2, obs_dim=3"):
        critic(_data().set(("a", "obs"), torch.zeros(6, 3, 3)))
