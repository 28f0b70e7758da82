"""Forward hooks that turn a plain Q-network's output into a greedy action.

For networks used outside TensorDicts: ``net.register_forward_hook(QValueHook("one_hot"))``
makes ``net(obs)`` return ``(action, action_value, chosen_action_value)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from rl_modules._spec import action_space_of
from rl_modules.actors.qvalue import greedy_action, mult_one_hot_action


class QValueHook:
    """Forward hook: ``values [..., n]`` -> ``(action, values, chosen_action_value [..., 1])``.

    Args:
        action_space: ``"categorical"``, ``"one_hot"`` or ``"mult_one_hot"``.
        var_nums: one-hot group sizes for ``"mult_one_hot"``.

    Examples:
        >>> import torch
        >>> net = torch.nn.Linear(4, 3)
        >>> _ = net.register_forward_hook(QValueHook("categorical"))
        >>> action, values, chosen = net(torch.zeros(2, 4))
        >>> action.shape, values.shape, chosen.shape
        (torch.Size([2]), torch.Size([2, 3]), torch.Size([2, 1]))
    """

    def __init__(self, action_space: str, var_nums: Sequence[int] | None = None) -> None:
        self.action_space = action_space_of(action_space, type(self).__name__, allow_multi=True)
        if self.action_space == "mult_one_hot" and var_nums is None:
            raise ValueError(
                f"{type(self).__name__}: var_nums (the size of each one-hot group) is required "
                "for action_space='mult_one_hot'."
            )
        self.var_nums = var_nums

    def __call__(
        self, net: nn.Module | None, observation: Any, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.action_space == "mult_one_hot":
            action, chosen = mult_one_hot_action(values, self.var_nums)
        else:
            action, chosen = greedy_action(values, self.action_space)
        return action, values, chosen


class DistributionalQValueHook(QValueHook):
    """Forward hook for distributional Q-networks (C51, Bellemare et al., 2017).

    ``values`` are log-probabilities ``[..., n_atoms, n]`` over the atoms of
    ``support``; the action maximises the expected value. Returns ``(action, values)``.

    Args:
        action_space: ``"categorical"`` or ``"one_hot"`` (or ``"mult_one_hot"`` with ``var_nums``).
        support: atom values ``[n_atoms]``.
        var_nums: one-hot group sizes for ``"mult_one_hot"``.

    Examples:
        >>> import torch
        >>> hook = DistributionalQValueHook("categorical", support=torch.tensor([0.0, 1.0]))
        >>> logp = torch.log(torch.tensor([[0.9, 0.2], [0.1, 0.8]]))
        >>> hook(None, None, logp)[0]
        tensor(1)
    """

    def __init__(
        self,
        action_space: str,
        support: torch.Tensor | None,
        var_nums: Sequence[int] | None = None,
    ) -> None:
        super().__init__(action_space, var_nums)
        if support is None:
            raise ValueError(f"{type(self).__name__}: support (the atom values) is required.")
        self.support = torch.as_tensor(support)

    def __call__(
        self, net: nn.Module | None, observation: Any, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n_atoms = self.support.numel()
        if values.ndim < 2 or values.shape[-2] != n_atoms:
            raise ValueError(
                f"{type(self).__name__}: values must be [..., n_atoms={n_atoms}, n_actions], got "
                f"{tuple(values.shape)}."
            )
        expected = (values.exp() * self.support.to(values).unsqueeze(-1)).sum(-2)
        action, _, _ = super().__call__(net, observation, expected)
        return action, values
