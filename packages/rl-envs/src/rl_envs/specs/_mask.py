"""Category masks shared by :class:`~rl_envs.specs.Categorical` and :class:`~rl_envs.specs.OneHot`.

Example:
    >>> import torch
    >>> mask = check_mask(torch.tensor([True, False, True]), torch.Size([2]), 3)
    >>> mask.shape
    torch.Size([2, 3])
    >>> bool((masked_sample(mask, torch.Size([2])) != 1).all())
    True
"""

from __future__ import annotations

import torch


def check_mask(mask: torch.Tensor | None, shape: torch.Size, n: int) -> torch.Tensor | None:
    """``mask`` as a bool tensor expanded to ``(*shape, n)``, or ``None`` for no mask.

    Raises:
        ValueError: when it does not broadcast to ``(*shape, n)`` or leaves an entry
            with no allowed category.
    """
    if mask is None:
        return None
    mask = torch.as_tensor(mask, dtype=torch.bool)
    try:
        mask = mask.expand(*shape, n)
    except RuntimeError as err:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to {(*shape, n)} "
            f"(the spec's shape followed by n={n})."
        ) from err
    if not bool(mask.any(-1).all()):
        raise ValueError("mask must allow at least one category for every entry.")
    return mask


def masked_sample(mask: torch.Tensor, lead: torch.Size) -> torch.Tensor:
    """One allowed category per entry, uniform among the allowed ones; shape ``lead``."""
    m = mask.expand(*lead, mask.shape[-1])
    flat = m.reshape(-1, m.shape[-1]).to(torch.float32)
    return torch.multinomial(flat, 1).reshape(lead)
