"""Split a ``[*B, T]`` batch into zero-padded trajectories ``[N, T_max]`` with a mask."""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

NestedKey = str | tuple[str, ...]


def _replace_last(key: NestedKey, name: str) -> NestedKey:
    return (*key[:-1], name) if isinstance(key, tuple) else name


def _ids_from_done(
    tensordict: TensorDictBase, done_key: NestedKey, ids_key: NestedKey
) -> torch.Tensor:
    """Trajectory ids ``[*B, T]`` from ``("next", done_key)``: a new id after each done step,
    ids unique across the rows of the batch."""
    done_key = ("next", *done_key) if isinstance(done_key, tuple) else ("next", done_key)
    done = tensordict.get(done_key, None)
    if done is None:
        raise KeyError(
            f"split_trajectories: the batch has neither trajectory ids ({ids_key!r}) nor the "
            f"done flags {done_key!r} to rebuild them; pass trajectory_key=... or done_key=..."
        )
    steps = tensordict.shape[-1]
    done = done.reshape(-1, steps, *done.shape[tensordict.batch_dims :]).flatten(2).any(-1)
    started = torch.zeros_like(done, dtype=torch.int64)
    started[:, 1:] = done[:, :-1].to(torch.int64)
    ids = started.cumsum(1)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), (ids[:, -1] + 1).cumsum(0)[:-1]])
    return (ids + offsets.unsqueeze(1)).reshape(tensordict.shape)


def split_trajectories(
    tensordict: TensorDictBase,
    *,
    prefix: NestedKey | None = None,
    trajectory_key: NestedKey | None = None,
    done_key: NestedKey | None = None,
    as_nested: bool | torch.layout = False,
    traj_key: NestedKey | None = None,
    mask_key: NestedKey | None = None,
) -> TensorDictBase:
    """Cut a collected batch into one row per trajectory piece, zero-padded on the right.

    Every sub-env row of the ``[*B, T]`` batch is cut where its trajectory id
    changes. Steps whose id is ``-1`` (frames a preempted worker never
    collected) are dropped. Rows are ordered by sub-env, then by time. A
    trajectory that spans two batches appears once in each, with the same id.

    Args:
        tensordict: a batch of shape ``[*B, T]``.
        prefix: TorchRL's: ids at ``(prefix, "traj_ids")``, mask at ``(prefix, "mask")``.
            Default: ``"collector"`` if the batch has a ``"collector"`` entry, else no
            prefix (``"traj_ids"``, ``"mask"``).
        trajectory_key: where the trajectory ids are (supersedes ``prefix``); the mask
            goes beside it (last key element replaced by ``"mask"``).
        done_key: when the ids are missing, they are rebuilt from ``("next", done_key)``
            (default ``"done"``: a new trajectory after each done step) and written.
        as_nested: ``True`` (or a layout, e.g. ``torch.jagged``) returns nested tensors
            of shape ``[N, -1]`` instead of padding; no mask is written.
        traj_key: same as ``trajectory_key`` (this package's earlier name).
        mask_key: where to write the mask (default: beside the ids).

    Returns:
        A TensorDict of shape ``[N, T_max]``: every leaf zero-padded (``False`` for bools),
        plus the mask (``True`` = real step).

    Raises:
        KeyError: neither the ids nor the done flags are in the batch.

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
    ids_key = trajectory_key if trajectory_key is not None else traj_key
    if ids_key is None:
        if prefix is None:
            prefix = "collector" if tensordict.get("collector", None) is not None else ()
        prefix = prefix if isinstance(prefix, tuple) else (prefix,)
        ids_key = (*prefix, "traj_ids") if prefix else "traj_ids"
    if mask_key is None:
        mask_key = _replace_last(ids_key, "mask")
    ids = tensordict.get(ids_key, None)
    if ids is None:
        ids = _ids_from_done(tensordict, done_key or "done", ids_key)
        tensordict = tensordict.copy()
        tensordict.set(ids_key, ids)
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

    if as_nested:
        layout = as_nested if isinstance(as_nested, torch.layout) else torch.jagged
        lengths = torch.bincount(seg, minlength=n_traj).tolist()
        order = torch.argsort(seg * max(t_max, 1) + pos)
        pieces = flat[order].split(lengths, 0)
        return LazyStackedTensorDict(*pieces, stack_dim=0).densify(layout=layout)
    out = flat.apply(_scatter, batch_size=[n_traj, t_max])
    mask = torch.zeros((n_traj, t_max), dtype=torch.bool, device=flat_ids.device)
    mask[seg, pos] = True
    out.set(mask_key, mask)
    return out
