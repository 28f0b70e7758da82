"""Distances and target-network updaters."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rl_objectives.common import LossModule

__all__ = ["HardUpdate", "SoftUpdate", "TargetNetUpdater", "distance_loss"]


def distance_loss(
    v1: torch.Tensor, v2: torch.Tensor, loss_function: str, *, reduction: str = "none"
) -> torch.Tensor:
    """Element-wise ``"l2"`` (squared error), ``"l1"`` or ``"smooth_l1"`` distance.

    Args:
        v1: first input.
        v2: second input, same shape.
        loss_function: ``"l2"``, ``"l1"`` or ``"smooth_l1"``.
        reduction: ``"none"`` (element-wise), ``"mean"`` or ``"sum"``, fused into the loss
            kernel (the same value as reducing the element-wise result).

    Examples:
        >>> distance_loss(torch.zeros(2), torch.tensor([1.0, 3.0]), "l2")
        tensor([1., 9.])
        >>> distance_loss(torch.zeros(2), torch.tensor([1.0, 3.0]), "l2", reduction="mean")
        tensor(5.)
    """
    if v1.shape != v2.shape:
        raise ValueError(
            f"distance_loss got shapes {tuple(v1.shape)} and {tuple(v2.shape)}; they must match."
        )
    if loss_function == "l2":
        return F.mse_loss(v1, v2, reduction=reduction)
    if loss_function == "l1":
        return F.l1_loss(v1, v2, reduction=reduction)
    if loss_function == "smooth_l1":
        return F.smooth_l1_loss(v1, v2, reduction=reduction)
    raise ValueError(f"loss_function must be 'l2', 'l1' or 'smooth_l1', got {loss_function!r}.")


class TargetNetUpdater:
    """Base of the updaters: collects the ``(online, target)`` pairs of a loss once.

    Args:
        loss_module: a :class:`~rl_objectives.LossModule` with target parameters.
    """

    def __init__(self, loss_module: LossModule) -> None:
        pairs = loss_module.target_pairs()
        if not pairs:
            raise ValueError(
                f"{type(loss_module).__name__} holds no target parameters; build it with "
                "delay_value=True / delay_actor=True / delay_qvalue=True to use an updater."
            )
        self.loss_module = loss_module

    def _lists(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        # read the pairs on each call: .to(device) replaces the tensors
        online, target = [], []
        for src, dst in self.loss_module.target_pairs():
            src_flat = src.flatten_keys()
            dst_flat = dst.flatten_keys()
            for key, value in dst_flat.items():
                online.append(src_flat.get(key).data)
                target.append(value.data)
        return online, target

    @torch.no_grad()
    def init_(self) -> None:
        """Copy the online parameters into the targets."""
        online, target = self._lists()
        torch._foreach_copy_(target, online)

    def step(self) -> None:
        """Update the targets (called after each optimizer step)."""
        raise NotImplementedError


class SoftUpdate(TargetNetUpdater):
    """Polyak averaging ``target = eps * target + (1 - eps) * online`` (Lillicrap et al. 2016).

    Args:
        loss_module: the loss.
        eps: weight of the old target, in ``[0, 1]``; give ``eps`` or ``tau``.
        tau: ``1 - eps``.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from rl_objectives import DQNLoss
        >>> net = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action_value"])
        >>> loss = DQNLoss(net, action_space="categorical", delay_value=True)
        >>> updater = SoftUpdate(loss, tau=0.005)
        >>> updater.step()
    """

    def __init__(
        self, loss_module: LossModule, *, eps: float | None = None, tau: float | None = None
    ) -> None:
        super().__init__(loss_module)
        if (eps is None) == (tau is None):
            if eps is None:
                eps = 0.999
            else:
                raise ValueError("give either eps or tau to SoftUpdate, not both.")
        if eps is None:
            eps = 1.0 - tau
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"eps must be in [0, 1], got {eps}.")
        self.eps = eps

    @torch.no_grad()
    def step(self) -> None:
        """Move each target towards its online parameters by ``1 - eps``."""
        online, target = self._lists()
        floats = [(o, t) for o, t in zip(online, target, strict=True) if t.is_floating_point()]
        if floats:
            torch._foreach_lerp_([t for _, t in floats], [o for o, _ in floats], 1.0 - self.eps)
        for o, t in zip(online, target, strict=True):
            if not t.is_floating_point():
                t.copy_(o)


class HardUpdate(TargetNetUpdater):
    """Copy the online parameters into the targets every ``value_network_update_interval`` steps.

    Args:
        loss_module: the loss.
        value_network_update_interval: number of :meth:`step` calls between copies.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from rl_objectives import DQNLoss
        >>> net = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action_value"])
        >>> updater = HardUpdate(DQNLoss(net, action_space="categorical"),
        ...                      value_network_update_interval=2)
        >>> updater.step(); updater.step()
    """

    def __init__(
        self, loss_module: LossModule, *, value_network_update_interval: int = 1000
    ) -> None:
        super().__init__(loss_module)
        if value_network_update_interval < 1:
            raise ValueError(
                f"value_network_update_interval must be >= 1, got {value_network_update_interval}."
            )
        self.value_network_update_interval = value_network_update_interval
        self.counter = 0

    def step(self) -> None:
        """Count one step; copy when the interval is reached."""
        self.counter += 1
        if self.counter % self.value_network_update_interval == 0:
            self.init_()
