"""Target-network updaters and :func:`hold_out_net`; TorchRL's ``objectives.utils`` names
(``distance_loss`` and the value-estimator registry functions) re-exported."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from rl_objectives._checks import UNIT, Bound, check_hyperparameter
from rl_objectives.common import LossModule
from rl_objectives.functional import distance_loss
from rl_objectives.value.registry import (
    ValueEstimators,
    build_value_estimator,
    default_value_kwargs,
    dispatch_value_estimator,
    get_value_estimator_entry,
    register_value_estimator,
)

__all__ = [
    "HardUpdate",
    "SoftUpdate",
    "TargetNetUpdater",
    "ValueEstimators",
    "build_value_estimator",
    "default_value_kwargs",
    "dispatch_value_estimator",
    "distance_loss",
    "get_value_estimator_entry",
    "hold_out_net",
    "register_value_estimator",
]


@contextmanager
def hold_out_net(network: nn.Module) -> Iterator[None]:
    """Freezes ``network``'s parameters inside the block: outputs still carry gradients
    to the inputs, none go to the weights (e.g. a critic used by the actor's loss).

    Each parameter's ``requires_grad`` is restored on exit, so blocks nest.

    Examples:
        >>> net = torch.nn.Linear(3, 1)
        >>> with hold_out_net(net):
        ...     net(torch.ones(1, 3)).requires_grad
        False
        >>> net(torch.ones(1, 3)).requires_grad
        True
    """
    params = list(network.parameters())
    previous = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(params, previous, strict=True):
            p.requires_grad_(flag)


class TargetNetUpdater:
    """Base of the updaters: finds the ``(online, target)`` pairs of a loss and syncs them.

    As in TorchRL, building an updater copies the online parameters (and buffers) into
    the targets once (:meth:`init_`); afterwards :meth:`step` moves only the entries
    whose online tensor requires gradients (parameters, not buffers such as running
    statistics).

    Args:
        loss_module: a :class:`~rl_objectives.LossModule` with target parameters.

    Raises:
        ValueError: if ``loss_module`` is not a ``LossModule``.
        RuntimeError: if it holds no target parameters.
    """

    def __init__(self, loss_module: LossModule) -> None:
        if not isinstance(loss_module, LossModule):
            raise ValueError(
                f"The loss_module must be a LossModule instance, got {type(loss_module).__name__}."
            )
        if not loss_module.target_pairs():
            raise RuntimeError(
                f"Did not find any target parameters or buffers in the loss module "
                f"{type(loss_module).__name__}; build it with delay_value=True / "
                "delay_actor=True / delay_qvalue=True to use an updater."
            )
        self.loss_module = loss_module
        loss_module._target_updater_missing = False  # the loss stops warning at each call
        self.initialized = False
        self.init_()

    def _lists(self, *, trainable_only: bool) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        # read the pairs on each call: .to(device) replaces the tensors
        online, target = [], []
        for src, dst in self.loss_module.target_pairs():
            src_flat = src.flatten_keys()
            dst_flat = dst.flatten_keys()
            for key, value in dst_flat.items():
                source = src_flat.get(key)
                if trainable_only and not source.requires_grad:
                    continue
                online.append(source.data)
                target.append(value.data)
        return online, target

    @torch.no_grad()
    def init_(self) -> None:
        """Copy the online parameters and buffers into the targets."""
        if self.initialized:
            warnings.warn(
                f"{type(self).__name__}: the updater was already initialized.", stacklevel=2
            )
        online, target = self._lists(trainable_only=False)
        torch._foreach_copy_(target, online)
        self.initialized = True

    def step(self) -> None:
        """Update the targets (called after each optimizer step)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """The updater's progress (the targets themselves live in the loss's state_dict)."""
        state: dict[str, Any] = {"initialized": self.initialized}
        if hasattr(self, "counter"):
            state["counter"] = self.counter
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.initialized = state_dict.get("initialized", self.initialized)
        if "counter" in state_dict and hasattr(self, "counter"):
            self.counter = state_dict["counter"]


class SoftUpdate(TargetNetUpdater):
    """Polyak averaging ``target = eps * target + (1 - eps) * online`` (Lillicrap et al. 2016).

    Args:
        loss_module: the loss.
        eps: weight of the old target, in ``[0, 1]``; give exactly one of ``eps`` and ``tau``.
        tau: ``1 - eps``.

    Raises:
        RuntimeError: if neither ``eps`` nor ``tau`` is given.
        ValueError: if both are given, or ``eps`` is outside ``[0, 1]``.

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
        if eps is None and tau is None:
            raise RuntimeError("SoftUpdate: give eps (weight of the old target) or tau = 1 - eps.")
        if eps is not None and tau is not None:
            raise ValueError("SoftUpdate: One and only one argument (tau or eps) can be specified.")
        if eps is None:
            check_hyperparameter("SoftUpdate", "tau", tau, UNIT)
            eps = 1.0 - tau
        check_hyperparameter("SoftUpdate", "eps", eps, UNIT)
        if eps < 0.5:
            warnings.warn(
                f"SoftUpdate: eps={eps} < 0.5 keeps less than half of the old target at each "
                "step; did you mean tau=?",
                stacklevel=2,
            )
        super().__init__(loss_module)
        self.eps = eps

    @torch.no_grad()
    def step(self) -> None:
        """Move each trainable target towards its online parameter by ``1 - eps``."""
        online, target = self._lists(trainable_only=True)
        if target:
            torch._foreach_lerp_(target, online, 1.0 - self.eps)


class HardUpdate(TargetNetUpdater):
    """Copy the online parameters into the targets once every ``value_network_update_interval + 1`` steps.

    As in TorchRL: :meth:`step` copies when the counter has reached
    ``value_network_update_interval`` (then resets it to 0), else increments it.

    Args:
        loss_module: the loss.
        value_network_update_interval: the counter value at which a step copies.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from rl_objectives import DQNLoss
        >>> net = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action_value"])
        >>> updater = HardUpdate(DQNLoss(net, action_space="categorical"),
        ...                      value_network_update_interval=2)
        >>> updater.step(); updater.step(); updater.step()  # the third step copies
        >>> updater.counter
        0
    """

    def __init__(
        self, loss_module: LossModule, *, value_network_update_interval: float = 1000
    ) -> None:
        check_hyperparameter(
            "HardUpdate",
            "value_network_update_interval",
            value_network_update_interval,
            Bound(0.0, integer=True),
        )
        super().__init__(loss_module)
        self.value_network_update_interval = value_network_update_interval
        self.counter = 0

    @torch.no_grad()
    def step(self) -> None:
        """Copy if the counter reached the interval (and reset it), else count one step."""
        if self.counter == self.value_network_update_interval:
            online, target = self._lists(trainable_only=True)
            torch._foreach_copy_(target, online)
            self.counter = 0
        else:
            self.counter += 1
