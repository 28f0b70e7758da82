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
