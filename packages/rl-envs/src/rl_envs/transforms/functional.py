"""Stateless tensor functions behind transforms (``torchrl.envs.transforms.functional``).

``cat_frames`` is the offline core of :class:`~rl_envs.transforms.CatFrames`:
a sliding window of ``N`` frames along a time dim, concatenated along a
feature dim, with the frames before a trajectory start padded.
"""

from __future__ import annotations

import torch

__all__ = ["cat_frames"]


def _window_mask(
    tensor: torch.Tensor, N: int, time_pos: int, done_mask: torch.Tensor | None
) -> torch.Tensor:
    """Boolean ``[*batch, T, N]``: slot ``j`` of the window ending at ``t`` is padding."""
    batch = tensor.shape[: time_pos + 1]
    if done_mask is None:
        T = tensor.shape[time_pos]
        t = torch.arange(T, device=tensor.device)
        j = torch.arange(N, device=tensor.device)
        return (j[None, :] < (N - 1 - t)[:, None]).expand(*batch, N)
    mask = done_mask.to(torch.bool)
    if mask.ndim == time_pos + 3:  # the (*batch, T, 1, N) layout of a per-step done flag
        mask = mask.squeeze(-2)
    if mask.shape[-1] != N or mask.ndim != time_pos + 2:
        raise ValueError(
            f"cat_frames: done_mask must have shape (*batch, time, N) = {(*batch, N)} "
            f"(or (*batch, time, 1, N)), got {tuple(done_mask.shape)}."
        )
    return mask.expand(*batch, N)


def cat_frames(
    tensor: torch.Tensor,
    N: int,
    dim: int,
    *,
    padding: str = "same",
    padding_value: float = 0.0,
    time_dim: int = -1,
    done_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Concatenates, for each time step, the ``N`` most recent frames along ``dim``.

    Output step ``t`` holds frames ``t - N + 1, ..., t`` (oldest first) along
    ``dim``. Window slots that fall before the trajectory start are padded:
    with ``"same"`` they repeat the window's first in-trajectory frame, with
    ``"constant"`` they hold ``padding_value``. Frame stacking comes from
    Mnih et al., "Playing Atari with Deep Reinforcement Learning" (2013).

    Args:
        tensor: frames, with a time dim at ``time_dim``.
        N: window length.
        dim: the (negative) dim to concatenate along; its size is multiplied by ``N``.
        padding: ``"same"`` or ``"constant"``.
        padding_value: the fill of ``"constant"`` padding.
        time_dim: the (negative) time dim of ``tensor``.
        done_mask: optional boolean ``(*batch, time, N)`` (or ``(*batch, time, 1, N)``)
            marking the window slots outside the current trajectory (they must form a
            prefix of each window). ``None``: one trajectory, only the first ``N - 1``
            steps are padded.

    Returns:
        ``tensor`` with its size along ``dim`` multiplied by ``N``; dtype and device kept.

    Raises:
        ValueError: on a non-negative ``dim`` / ``time_dim`` or an unknown ``padding``.

    Example:
        >>> import torch
        >>> cat_frames(torch.arange(3.0).view(3, 1), N=2, dim=-1, time_dim=-2, padding="constant")
        tensor([[0., 0.],
                [0., 1.],
                [1., 2.]])
    """
    if dim >= 0:
        raise ValueError(
            f"cat_frames: dim must be < 0 (batch-size invariant), got dim={dim}; count "
            "it from the end, e.g. -1 for the last dim."
        )
    if time_dim >= 0:
        raise ValueError(f"cat_frames: time_dim must be < 0, got time_dim={time_dim}.")
    if padding not in ("same", "constant"):
        raise ValueError(
            f"cat_frames: padding must be one of 'same' or 'constant', got {padding!r}."
        )
    if N < 1:
        raise ValueError(f"cat_frames: N must be >= 1, got {N}.")
    time_pos = tensor.ndim + time_dim
    T = tensor.shape[time_pos]
    mask = _window_mask(tensor, N, time_pos, done_mask)  # [*batch, T, N]
    t = torch.arange(T, device=tensor.device).expand(mask.shape[:-1])
    n_padded = mask.sum(-1)
    trailing = (1,) * (tensor.ndim - time_pos - 1)
    frames = []
    for j in range(N):
        if padding == "same":
            source = t - (N - 1) + torch.clamp(n_padded, min=j)
        else:
            source = (t - (N - 1) + j).clamp_min(0)
        index = source.reshape(*source.shape, *trailing).expand(tensor.shape)
        frame = torch.gather(tensor, time_pos, index)
        if padding == "constant":
            pad = mask[..., j].reshape(*source.shape, *trailing)
            frame = torch.where(pad, torch.full_like(frame, padding_value), frame)
        frames.append(frame)
    return torch.cat(frames, dim=dim)
