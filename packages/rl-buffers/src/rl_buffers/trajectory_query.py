"""Splitting transitions into :class:`Trajectory` views and keeping those a predicate accepts."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from rl_buffers.traj_language import ElementwiseComparison, ambiguous_error
from rl_buffers.trajectory import Trajectory
from rl_buffers.trajectory_bounds import find_start_stop_traj

ID_KEYS: tuple[NestedKey, ...] = (("collector", "traj_ids"), "traj_ids", "episode")
"""Entries of trajectory ids looked up, in order, when no ``trajectory_key`` is given."""

DEFAULT_DONE_KEYS: tuple[str, ...] = ("done", "truncated", "terminated")
"""The end-of-episode flags of a transition (TorchRL's ``torchrl.data.DEFAULT_DONE_KEYS``).

Example:
    >>> from rl_buffers import DEFAULT_DONE_KEYS
    >>> [("next", key) for key in DEFAULT_DONE_KEYS]
    [('next', 'done'), ('next', 'truncated'), ('next', 'terminated')]
"""

END_KEY_GROUPS: tuple[tuple[NestedKey, ...], ...] = (
    tuple(("next", key) for key in DEFAULT_DONE_KEYS),
    DEFAULT_DONE_KEYS,
)
"""End-of-episode flags used without ids: the first group present, its flags OR-ed."""


def split_signal(
    data: TensorDictBase, trajectory_key: NestedKey | None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``(ids, None)`` or ``(None, end_flags)`` of ``data``, shaped as its batch.

    Raises:
        KeyError: ``trajectory_key`` is missing, or no id nor end entry exists.
    """
    shape = data.batch_size
    for key in (trajectory_key,) if trajectory_key is not None else ID_KEYS:
        ids = data.get(key, None)
        if ids is not None:
            return ids.reshape(shape), None
    if trajectory_key is not None:
        raise KeyError(
            f"trajectory_key {trajectory_key!r} is not an entry of the data; "
            f"its keys are {sorted(map(str, data.keys(True, True)))}."
        )
    for group in END_KEY_GROUPS:
        found = [key for key in group if data.get(key, None) is not None]
        if found:
            end = torch.zeros(shape, dtype=torch.bool, device=data.device)
            for key in found:
                end = end | data.get(key).reshape(shape).to(torch.bool)
            warnings.warn(
                f"no trajectory ids found (looked up {ID_KEYS}); splitting on the end-of-episode "
                f"flags {tuple(found)}: a trajectory whose last step is not flagged merges with "
                "the next one. Store ids (('collector', 'traj_ids')) or pass trajectory_key.",
                UserWarning,
                stacklevel=3,
            )
            return None, end
    raise KeyError(
        f"Cannot split data into trajectories: no id entry (looked up {ID_KEYS}) and no "
        f"end-of-episode entry (looked up {END_KEY_GROUPS}). Pass trajectory_key=<id entry>."
    )


def check_predicate(predicate: Any) -> None:
    """Refuses an elementwise comparison (``traj.reward > 1``) used as a trajectory filter."""
    if isinstance(predicate, ElementwiseComparison):
        raise ambiguous_error(predicate._description)


def iter_trajectories(
    data: TensorDictBase, trajectory_key: NestedKey | None = None
) -> Iterator[Trajectory]:
    """Yields the trajectories of a flat ``[N]`` batch of transitions, in order.

    Consecutive transitions with the same id (``trajectory_key``, else
    ``("collector", "traj_ids")``, ``"traj_ids"`` or ``"episode"``) form one
    trajectory; without ids, the OR of the ``done`` / ``truncated`` /
    ``terminated`` flags ends them (with a warning: an unflagged end merges two
    trajectories). Each is a view of ``data``, not a copy.

    Raises:
        TypeError: ``data`` is not a TensorDict.
        ValueError: ``data`` has more than one batch dim.
        KeyError: there is no id nor end entry (see :func:`split_signal`).

    Examples:
        >>> from tensordict import TensorDict
        >>> data = TensorDict(traj_ids=torch.tensor([0, 0, 1, 1, 1]), batch_size=[5])
        >>> [t.length for t in iter_trajectories(data)]
        [2, 3]
    """
    if not isinstance(data, TensorDictBase):
        raise TypeError(
            f"iter_trajectories expects a TensorDictBase of transitions; got {type(data).__name__}."
        )
    if data.batch_dims != 1:
        raise ValueError(
            f"iter_trajectories expects a single batch dimension [N]; got {tuple(data.batch_size)}."
        )
    if data.batch_size[0] == 0:
        return
    ids, end = split_signal(data, trajectory_key)
    start, stop, _ = find_start_stop_traj(trajectory=ids, end=end, at_capacity=False)
    for first, last in zip(start[:, 0].tolist(), stop[:, 0].tolist(), strict=True):
        yield Trajectory(data[first : last + 1])


def filter_trajectories(
    data: TensorDictBase,
    predicate: Callable[[Trajectory], bool] | None = None,
    *,
    trajectory_key: NestedKey | None = None,
) -> list[Trajectory]:
    """The trajectories of ``data`` (see :func:`iter_trajectories`) that ``predicate`` accepts.

    Args:
        data: a flat ``[N]`` TensorDict of transitions.
        predicate: a :class:`~rl_buffers.traj_language.TrajectoryPredicate` built from
            ``traj`` or any ``Trajectory -> bool`` callable; ``None`` keeps all.
        trajectory_key: the entry of trajectory ids (default: looked up).

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import traj
        >>> data = TensorDict(traj_ids=torch.tensor([0, 0, 1, 1, 1]), batch_size=[5])
        >>> [t.length for t in filter_trajectories(data, traj.length > 2)]
        [3]
    """
    check_predicate(predicate)
    return [
        trajectory
        for trajectory in iter_trajectories(data, trajectory_key)
        if predicate is None or predicate(trajectory)
    ]
