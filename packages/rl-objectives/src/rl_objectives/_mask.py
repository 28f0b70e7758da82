"""Mask-aware reduction of a per-position loss (TorchRL's ``loss_mask_key`` contract).

Padded or invalid positions of a batch (a collector's ``("collector", "mask")``, a
replay buffer's ``"shifted_valid"``) must not count in a loss. Masked positions are
*selected out* rather than multiplied by zero, so a non-finite value there poisons neither
the loss nor its gradient.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

# The validity masks TorchRL's own components write; "auto" ANDs every one that is present.
AUTO_LOSS_MASK_KEYS: tuple[NestedKey, ...] = (("collector", "mask"), "shifted_valid")


def check_loss_mask_key(value: object, owner: str) -> NestedKey | None:
    """``value`` if it is ``"auto"``, ``None``, a key name or a non-empty tuple of names.

    Raises:
        ValueError: anything else.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, tuple) and value and all(isinstance(part, str) for part in value):
        return value
    raise ValueError(
        f"{owner}.loss_mask_key must be 'auto', None, an entry name or a tuple of names "
        f"(a nested key), got {value!r}."
    )


def _aligned(mask: torch.Tensor, loss: torch.Tensor) -> torch.Tensor:
    """``mask`` broadcast to ``loss``'s shape: trailing singleton dims dropped (``[B, T, 1]``
    against a ``[B, T]`` loss), missing trailing dims added (one flag per position)."""
    mask = mask.to(torch.bool)
    while mask.ndim > loss.ndim and mask.shape[-1] == 1:
        mask = mask.squeeze(-1)
    if mask.ndim > loss.ndim:
        raise ValueError(
            f"the loss mask of shape {tuple(mask.shape)} has more non-singleton dimensions "
            f"than the loss of shape {tuple(loss.shape)}; pass a mask with one flag per loss "
            "position."
        )
    mask = mask.reshape(*mask.shape, *([1] * (loss.ndim - mask.ndim)))
    return mask.expand_as(loss)


def masked_reduce(
    loss: torch.Tensor,
    reduction: str,
    tensordict: TensorDictBase | None,
    loss_mask_key: NestedKey | None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduce ``loss`` (``"mean"``, ``"sum"`` or ``"none"``) over its valid positions.

    Args:
        loss: the per-position loss.
        reduction: how to reduce.
        tensordict: where the masks are read (``None``: only ``mask``).
        loss_mask_key: ``"auto"`` (every entry of ``AUTO_LOSS_MASK_KEYS`` present), one
            nested key (read if present), or ``None`` (no mask read).
        mask: a mask the caller passes; with ``reduction="none"`` the result then holds
            only the valid positions (compacted) instead of zeros at the others.

    Returns:
        The reduced loss.
    """
    masks = [] if mask is None else [mask]
    if tensordict is not None and loss_mask_key is not None:
        keys = AUTO_LOSS_MASK_KEYS if loss_mask_key == "auto" else (loss_mask_key,)
        for key in keys:
            found = tensordict.get(key, None)
            if found is not None:
                masks.append(found)
    if not masks:
        if reduction == "none":
            return loss
        return loss.sum() if reduction == "sum" else loss.mean()
    valid = _aligned(masks[0], loss)
    for other in masks[1:]:
        valid = valid & _aligned(other, loss)
    if reduction == "none":
        if mask is not None:
            return loss[valid]
        return torch.where(valid, loss, torch.zeros((), dtype=loss.dtype, device=loss.device))
    kept = loss[valid]
    return kept.sum() if reduction == "sum" else kept.mean()
