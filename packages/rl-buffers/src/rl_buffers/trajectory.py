"""``Trajectory``: one trajectory's transitions, read by attribute (TorchRL's query view)."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorClass, TensorDictBase
from tensordict.utils import NestedKey


class Trajectory(TensorClass["nocast"]):
    """The transitions of one trajectory (a ``[T]`` TensorDict) with entries as attributes.

    ``trajectory.name`` reads entry ``name`` of the root, else ``("next", name)``:
    ``trajectory.reward`` and ``trajectory.done`` are the post-step entries, and
    ``trajectory.observation`` the root one. It is a tensorclass: slicing gives a
    ``Trajectory``, ``lazy_stack`` of trajectories of different lengths a ragged
    ``Trajectory``; a key (``trajectory["next", "done"]``) indexes the data.

    Args:
        data: the transitions, a TensorDict with one batch dim ``[T]``.

    Raises:
        ValueError: ``data`` has more than one batch dim.

    Examples:
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"obs": torch.zeros(3, 2), ("next", "reward"): torch.ones(3, 1)}, [3])
        >>> trajectory = Trajectory(data)
        >>> trajectory.length, trajectory.obs.shape, float(trajectory.total_reward)
        (3, torch.Size([3, 2]), 3.0)
        >>> trajectory[1:].length
        2
    """

    data: TensorDictBase

    def __post_init__(self) -> None:
        data = self.data
        if self.batch_size or data is None or not data.batch_dims:
            return
        if data.batch_dims != 1:
            raise ValueError(
                "Trajectory expects data with a single batch dimension [T]; got "
                f"batch_size={tuple(data.batch_size)}. Split it first (iter_trajectories)."
            )
        self.batch_size = data.batch_size

    @property
    def length(self) -> int:
        """The number of transitions."""
        return int(self.batch_size[0])

    @property
    def total_reward(self) -> torch.Tensor:
        """The sum of the rewards (``("next", "reward")``)."""
        return self.reward.sum()

    def get(self, key: NestedKey, default: Any = None) -> Any:
        """Entry ``key`` of the data, else ``("next", key)`` for a string key, else ``default``."""
        value = self.data.get(key, None)
        if value is None and isinstance(key, str):
            value = self.data.get(("next", key), None)
        return default if value is None else value

    def keys(self, *args: Any, **kwargs: Any) -> Any:
        """The keys of the data (TensorDict's ``keys`` arguments)."""
        return self.data.keys(*args, **kwargs)

    def __repr__(self) -> str:
        size = (
            f"length={self.length}"
            if len(self.batch_size) == 1
            else f"batch_size={tuple(self.batch_size)}"
        )
        keys = sorted(map(str, self.data.keys())) if self.data is not None else None
        return f"Trajectory({size}, keys={keys})"


# The tensorclass machinery installs its own ``__getattr__`` / ``__getitem__`` on the
# class; the trajectory's entry lookup is chained after them here.
_field_getattr = Trajectory.__getattr__
_batch_getitem = Trajectory.__getitem__


def _entry_getattr(self: Trajectory, name: str) -> Any:
    try:
        return _field_getattr(self, name)
    except AttributeError:
        if name.startswith("_"):
            raise
        value = self.get(name)
        if value is None:
            keys = sorted(map(str, self.data.keys(include_nested=True, leaves_only=True)))
            raise AttributeError(
                f"Trajectory has no entry {name!r} in its data (looked up {name!r} and "
                f"{('next', name)!r}); its keys are {keys}."
            ) from None
        return value


def _key_or_batch_getitem(self: Trajectory, index: Any) -> Any:
    if isinstance(index, str) or (
        isinstance(index, tuple) and index and all(isinstance(k, str) for k in index)
    ):
        return self.data[index]
    return _batch_getitem(self, index)


Trajectory.__getattr__ = _entry_getattr
Trajectory.__getitem__ = _key_or_batch_getitem
