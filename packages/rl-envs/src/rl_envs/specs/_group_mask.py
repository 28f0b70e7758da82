"""Masks over groups of categories, shared by ``MultiCategorical`` and ``MultiOneHot``.

A group mask has the layout of the equivalent one-hot value: shape
``(*lead, sum(nvec))``, the allowed categories of group ``i`` at positions
``offset_i .. offset_i + nvec[i] - 1``. :func:`grouped` lays it out as
``(*lead, k, max(nvec))`` with padding ``False``, so one category per group can
be sampled, checked or chosen with ordinary tensor ops.

Example:
    >>> import torch
    >>> nvec = [2, 3]
    >>> mask = check_group_mask(torch.tensor([True, False, False, True, True]), nvec, torch.Size([]))
    >>> grouped(mask, nvec).int().tolist()
    [[1, 0, 0], [0, 1, 1]]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def check_group_mask(
    mask: torch.Tensor | None, nvec: Sequence[int], lead: torch.Size
) -> torch.Tensor | None:
    """``mask`` as a bool tensor expanded to ``(*lead, sum(nvec))``, or ``None`` for no mask.

    Raises:
        ValueError: when it does not broadcast to ``(*lead, sum(nvec))`` or leaves a
            group of some entry with no allowed category.
    """
    if mask is None:
        return None
    total = sum(nvec)
    mask = torch.as_tensor(mask, dtype=torch.bool)
    try:
        mask = mask.expand(*lead, total)
    except RuntimeError as err:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to {(*lead, total)}: "
            f"the spec's leading dims followed by sum(nvec)={total} (nvec={list(nvec)})."
        ) from err
    if not bool(grouped(mask, nvec).any(-1).all()):
        raise ValueError(
            f"mask must allow at least one category in every group (nvec={list(nvec)})."
        )
    return mask


def grouped(mask: torch.Tensor, nvec: Sequence[int]) -> torch.Tensor:
    """``mask`` of shape ``(*lead, sum(nvec))`` as ``(*lead, len(nvec), max(nvec))``, padding ``False``."""
    sizes = torch.as_tensor(list(nvec), device=mask.device)
    offsets = torch.cumsum(sizes, 0) - sizes
    pos = torch.arange(int(sizes.max()), device=mask.device)
    pad = pos.unsqueeze(0) >= sizes.unsqueeze(1)
    idx = (offsets.unsqueeze(1) + pos).clamp(max=mask.shape[-1] - 1)
    return mask[..., idx] & ~pad
