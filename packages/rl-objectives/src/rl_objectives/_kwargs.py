"""Tensors passed as keyword arguments to a loss, as TorchRL's ``loss(observation=..., next_reward=...)``."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

__all__ = ["kwargs_to_tensordict"]


def kwargs_to_tensordict(kwargs: dict[str, torch.Tensor], who: str) -> TensorDictBase:
    """Put keyword tensors in a TensorDict: ``next_<name>`` goes to ``("next", <name>)``.

    The batch size is the longest leading shape every entry shares (tensordict's
    ``auto_batch_size_``), as TorchRL's keyword calls build it.

    Raises:
        TypeError: if a value is not a tensor (or TensorDict).

    Examples:
        >>> td = kwargs_to_tensordict({"observation": torch.zeros(4, 3), "next_reward": torch.zeros(4, 1)}, "Loss")
        >>> td["next", "reward"].shape, td.batch_size
        (torch.Size([4, 1]), torch.Size([4]))
    """
    entries: dict = {}
    for name, value in kwargs.items():
        if not isinstance(value, (torch.Tensor, TensorDictBase)):
            raise TypeError(
                f"{who}: keyword argument {name}= must be a tensor (the loss is called with tensors "
                f"as keywords, e.g. observation=..., next_reward=...), got {type(value).__name__}."
            )
        if name.startswith("next_"):
            entries.setdefault("next", {})[name[len("next_") :]] = value
        else:
            entries[name] = value
    td = TensorDict(entries, batch_size=[])
    td.auto_batch_size_()
    return td
