"""Progress snapshots and remote helpers every collector shares (``stats``, ``map_fn``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

STATS_VIEWS = ("aggregate", "per_worker", "both")


def progress_stats(
    frames: int, batches: int, total_frames: int, frames_per_batch: int, policy_version: Any
) -> dict[str, int | bool]:
    """A JSON-serialisable snapshot of a collector's progress (TorchRL's ``stats()`` keys).

    ``total_frames`` and ``completed`` are left out for an endless collector (``-1``);
    ``policy_version`` only when it is an int.

    Examples:
        >>> progress_stats(16, 1, 32, 16, 0)["completed"]
        False
    """
    stats: dict[str, int | bool] = {"frames": int(frames), "batches": int(batches)}
    if total_frames >= 0:
        stats["total_frames"] = int(total_frames)
        stats["completed"] = frames >= total_frames
    stats["requested_frames_per_batch"] = int(frames_per_batch)
    if isinstance(policy_version, int):
        stats["policy_version"] = policy_version
    return stats


def check_stats_view(workers: str) -> None:
    """Raises a ``ValueError`` for a ``workers=`` view other than TorchRL's three."""
    if workers not in STATS_VIEWS:
        raise ValueError(
            f"workers must be one of 'aggregate', 'per_worker' or 'both', got {workers!r}."
        )


def call_args(
    list_of_args: Sequence[tuple] | None, list_of_kwargs: Sequence[dict] | None
) -> list[tuple[tuple, dict]]:
    """Pairs ``(args, kwargs)`` for ``map_fn``; a missing list repeats empty entries.

    Raises:
        ValueError: the two lists have different lengths.
    """
    if list_of_args is None:
        list_of_args = [()] * len(list_of_kwargs) if list_of_kwargs else [()]
    if list_of_kwargs is None:
        list_of_kwargs = [{}] * len(list_of_args)
    if len(list_of_args) != len(list_of_kwargs):
        raise ValueError(
            "list_of_args and list_of_kwargs must have the same length; got "
            f"{len(list_of_args)} and {len(list_of_kwargs)}."
        )
    return [(tuple(a), dict(k)) for a, k in zip(list_of_args, list_of_kwargs, strict=True)]


def bound_method(owner: Any, method_name: str) -> Callable[..., Any]:
    """``owner.<method_name>``, refusing an attribute that cannot be called."""
    method = getattr(owner, method_name)
    if not callable(method):
        raise AttributeError(f"{type(owner).__name__}.{method_name} is not callable.")
    return method
