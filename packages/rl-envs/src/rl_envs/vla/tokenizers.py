"""``UniformActionTokenizer``: continuous actions <-> per-dimension bin ids (RT-2 / OpenVLA)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["UniformActionTokenizer"]


class UniformActionTokenizer(nn.Module):
    """Cuts ``[low, high]`` of each action dimension into ``num_bins`` equal bins.

    ``encode`` gives the bin index of each entry (clamped into ``[0, num_bins)``: values
    outside the range go to the end bins), ``decode`` the bin centre, so the round trip is
    off by at most half a bin, ``(high - low) / (2 * num_bins)`` (Brohan et al., "RT-2",
    2023; Kim et al., "OpenVLA", 2024).

    Args:
        num_bins: bins per dimension (the token vocabulary size).
        low, high: the range, scalars or per-dimension ``[A]`` tensors.
        action_dim: repeat scalar bounds to ``[action_dim]``.

    Example:
        >>> tok = UniformActionTokenizer(256, low=-1.0, high=1.0)
        >>> tok.encode(torch.tensor([-1.0, 0.0, 1.0]))
        tensor([  0, 128, 255])
        >>> tok.decode(torch.tensor([0, 255]))
        tensor([-0.9961,  0.9961])
    """

    def __init__(
        self,
        num_bins: int,
        *,
        low: float | torch.Tensor,
        high: float | torch.Tensor,
        action_dim: int | None = None,
    ) -> None:
        super().__init__()
        if num_bins < 1:
            raise ValueError(f"UniformActionTokenizer: num_bins must be >= 1, got {num_bins}.")
        low_t = torch.as_tensor(low, dtype=torch.float32)
        high_t = torch.as_tensor(high, dtype=torch.float32)
        if action_dim is not None:
            low_t, high_t = (
                t.expand(action_dim).clone() if t.ndim == 0 else t for t in (low_t, high_t)
            )
        if low_t.shape != high_t.shape:
            raise ValueError(
                f"UniformActionTokenizer: low and high must have the same shape, got "
                f"{tuple(low_t.shape)} and {tuple(high_t.shape)}."
            )
        if not bool((high_t > low_t).all()):
            raise ValueError("UniformActionTokenizer: high must exceed low in every dimension.")
        self.num_bins = int(num_bins)
        self.register_buffer("low", low_t)
        self.register_buffer("high", high_t)

    @property
    def vocab_size(self) -> int:
        """The number of distinct tokens (``num_bins``)."""
        return self.num_bins

    @property
    def action_dim(self) -> int | None:
        """The action size of per-dimension bounds (``None`` for scalar ones)."""
        return int(self.low.shape[-1]) if self.low.ndim else None

    def encode(self, actions: torch.Tensor) -> torch.Tensor:
        """Bin ids (``long``, same shape as ``actions``)."""
        frac = (actions - self.low) / (self.high - self.low)
        return (frac * self.num_bins).floor().long().clamp(0, self.num_bins - 1)

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        """Bin centres (``float32``, same shape as ``tokens``)."""
        return self.low + (tokens.to(self.low.dtype) + 0.5) / self.num_bins * (self.high - self.low)

    @classmethod
    def from_metadata(cls, metadata: Any, num_bins: int) -> UniformActionTokenizer:
        """From the ``action_low`` / ``action_high`` of a :class:`RobotDatasetMetadata`."""
        if metadata.action_low is None or metadata.action_high is None:
            raise ValueError(
                f"metadata {metadata.dataset_id!r} has no action bounds: set action_low and "
                "action_high to tokenize uniformly."
            )
        return cls(num_bins, low=metadata.action_low, high=metadata.action_high)
