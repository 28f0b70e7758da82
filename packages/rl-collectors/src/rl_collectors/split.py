"""Split a ``[*B, T]`` batch into zero-padded trajectories ``[N, T_max]`` with a mask."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

NestedKey = str | tuple[str, ...]

TRAJ_IDS_KEY: tuple[str, str] = ("collector", "traj_ids")
MASK_KEY: tuple[str, str] = ("collector", "mask")


def split_trajectories(
    tensordict: TensorDictBase,
    *,
    traj_key: NestedKey = TRAJ_IDS_KEY,
    mask_key: NestedKey = MASK_KEY,
) -> TensorDictBase:
    """Cut a collected batch into one row per trajectory piece, zero-padded on the right.

    Every sub-env row of the ``[*B, T]`` batch is cut where its trajectory id
    changes. Steps whose id is ``-1`` (frames a preempted worker never
    collected) are dropped. Rows are ordered by sub-env, then by time. A
    trajectory that spans two batches appears once in each, with the same id.

    Args:
        tensordict: a batch of shape ``[*B, T]`` holding ``traj_key`` (int64 ``[*B, T]``).
        traj_key: where the trajectory ids are.
        mask_key: where to write the validity mask (``True`` = real step).

    Returns:
        A TensorDict of shape ``[N, T_max]``: every leaf zero-padded (``False`` for bools),
        plus ``mask_key``.

    Raises:
        KeyError: if ``traj_key`` is missing.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"x": torch.arange(5.0), ("collector", "traj_ids"): torch.tensor([0, 0, 0, 1, 1])}, [5])
        >>> out = split_trajectories(td)
        >>> out.shape, out["collector", "mask"].tolist()
        (torch.Size([2, 3]), [[True, True, True], [True, True, False]])
    """
    if tensordict.batch_dims < 1:
        raise ValueError(
            f"split_trajectories expects a batch of shape [*B, T] (at least one dim); got {tuple(tensordict.shape)}."
        )
    ids = tensordict.get(traj_key, None)
    if ids is None:
        raise KeyError(
            f"split_trajectories: key {traj_key!r} (the trajectory ids) is missing; collectors write it. "
            "Pass traj_key=... if your batch stores them elsewhere."
        )
    steps = tensordict.shape[-1]
    ids = ids.reshape(-1, steps).to(torch.int64)
    # A segment starts at t == 0 of every row and wherever the id changes within a row.
    starts = torch.ones_like(ids, dtype=torch.bool)
    starts[:, 1:] = ids[:, 1:] != ids[:, :-1]
    flat_ids = ids.reshape(-1)
    seg = torch.cumsum(starts.reshape(-1).to(torch.int64), 0) - 1
    valid = flat_ids != -1
    positions = torch.arange(flat_ids.numel(), device=flat_ids.device)
    start_pos = positions[starts.reshape(-1)]
    pos = positions - start_pos[seg]
    seg, pos = seg[valid], pos[valid]
    # Renumber the kept segments 0..N-1 (segments made only of -1 disappear).
    kept, seg = torch.unique(seg, return_inverse=True)
    n_traj = int(kept.numel())
    t_max = int(pos.max()) + 1 if pos.numel() else 0
    flat = tensordict.reshape(-1)[valid]

    def _scatter(value: torch.Tensor) -> torch.Tensor:
        out = torch.zeros((n_traj, t_max, *value.shape[1:]), dtype=value.dtype, device=value.device)
        out[seg, pos] = value
        return out

    out = flat.apply(_scatter, batch_size=[n_traj, t_max])
    mask = torch.zeros((n_traj, t_max), dtype=torch.bool, device=flat_ids.device)
    mask[seg, pos] = True
    out.set(mask_key, mask)
    return out
