"""Pure functions that cut ``[N, T]`` batches into trajectory segments at ``is_init``.

A segment starts at ``t = 0`` and wherever ``is_init`` is ``True``; an RNN
run independently on each segment (zero state at an ``is_init`` start) is
exactly a step-by-step loop that resets its state at ``is_init``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class Segments(NamedTuple):
    """Where each ``(n, t)`` element goes in the padded ``[S, L]`` layout."""

    seg_id: torch.Tensor  # [N, T] long: the segment holding (n, t)
    pos: torch.Tensor  # [N, T] long: position inside that segment
    lengths: torch.Tensor  # [S] long
    first: torch.Tensor  # [N] long: the segment starting at (n, 0)
    last: torch.Tensor  # [S, 2] long: (n, t) of each segment's last element
    max_len: int


def split_at_resets(is_init: torch.Tensor) -> Segments:
    """Segment layout of a ``[N, T]`` bool reset mask (the first step always starts one).

    Examples:
        >>> s = split_at_resets(torch.tensor([[False, False, True, False]]))
        >>> s.seg_id.tolist(), s.pos.tolist(), s.lengths.tolist()
        ([[0, 0, 1, 1]], [[0, 1, 0, 1]], [2, 2])
    """
    n, t = is_init.shape
    start = is_init.clone()
    start[:, 0] = True
    flat_start = start.reshape(-1)
    seg_id = torch.cumsum(flat_start.long(), 0) - 1
    num_segments = int(seg_id[-1]) + 1
    idx = torch.arange(n * t, device=is_init.device)
    start_idx = idx[flat_start]  # flat index of each segment's first element
    pos = idx - start_idx[seg_id]
    lengths = torch.bincount(seg_id, minlength=num_segments)
    end_idx = start_idx + lengths - 1
    last = torch.stack([end_idx // t, end_idx % t], -1)
    seg_id = seg_id.reshape(n, t)
    return Segments(seg_id, pos.reshape(n, t), lengths, seg_id[:, 0], last, int(lengths.max()))


def pad_segments(x: torch.Tensor, seg: Segments) -> torch.Tensor:
    """``[N, T, *F] -> [S, L, *F]`` with zeros after each segment's end."""
    out = x.new_zeros(len(seg.lengths), seg.max_len, *x.shape[2:])
    return out.index_put((seg.seg_id, seg.pos), x)


def unpad_segments(y: torch.Tensor, seg: Segments) -> torch.Tensor:
    """``[S, L, *F] -> [N, T, *F]``, the inverse of :func:`pad_segments`."""
    return y[seg.seg_id, seg.pos]
