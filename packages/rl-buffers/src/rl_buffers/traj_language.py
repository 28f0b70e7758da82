"""The trajectory query language: ``traj.reward.sum() > 100`` builds a predicate.

``traj.<entry>`` (or ``traj[key]``) is a per-transition field. Reducing it
(``sum``, ``mean``, ``max``, ``min``, ``first``, ``last``) and comparing gives a
:class:`TrajectoryPredicate`; comparing it directly gives an elementwise
comparison that must be reduced with ``.any()`` or ``.all()``. Predicates combine
with ``&``, ``|`` and ``~`` and know the entries they read (``required_keys``),
so a buffer query reads only those.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from tensordict.utils import NestedKey, unravel_key

_SYMBOLS = {
    operator.gt: ">",
    operator.ge: ">=",
    operator.lt: "<",
    operator.le: "<=",
    operator.eq: "==",
    operator.ne: "!=",
}


def _union(first: frozenset | None, second: frozenset | None) -> frozenset | None:
    return None if first is None or second is None else first | second


class TrajectoryPredicate:
    """A yes / no question about a trajectory, composable with ``&``, ``|`` and ``~``.

    Args:
        fn: trajectory -> truth value.
        description: how the predicate prints.
        keys: the entries ``fn`` reads; ``None`` when unknown (a query then reads all).

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_buffers import Trajectory, traj
        >>> t = Trajectory(TensorDict({("next", "reward"): torch.ones(4, 1)}, [4]))
        >>> predicate = (traj.reward.sum() > 3) & (traj.length < 10)
        >>> predicate(t), predicate.required_keys()
        (True, frozenset({'reward'}))
    """

    def __init__(
        self,
        fn: Callable[[Any], Any],
        description: str = "predicate",
        keys: frozenset | None = None,
    ) -> None:
        self._fn = fn
        self._description = description
        self._keys = keys

    def required_keys(self) -> frozenset | None:
        """The entries the predicate reads (``None``: unknown, e.g. a wrapped callable)."""
        return self._keys

    def __call__(self, trajectory: Any) -> bool:
        return bool(self._fn(trajectory))

    def __and__(self, other: TrajectoryPredicate) -> TrajectoryPredicate:
        return TrajectoryPredicate(
            lambda t: self(t) and other(t),
            f"({self._description} & {other._description})",
            _union(self._keys, other._keys),
        )

    def __or__(self, other: TrajectoryPredicate) -> TrajectoryPredicate:
        return TrajectoryPredicate(
            lambda t: self(t) or other(t),
            f"({self._description} | {other._description})",
            _union(self._keys, other._keys),
        )

    def __invert__(self) -> TrajectoryPredicate:
        return TrajectoryPredicate(lambda t: not self(t), f"~{self._description}", self._keys)

    def __repr__(self) -> str:
        return f"TrajectoryPredicate({self._description})"


def ambiguous_error(description: str) -> TypeError:
    """The error for an elementwise comparison used as a whole-trajectory filter."""
    return TypeError(
        f"{description} compares per-transition values, so it is not a trajectory filter: "
        "reduce it with .any() or .all()."
    )


class ElementwiseComparison:
    """A per-transition comparison (``traj.reward > 1``); ``.any()`` / ``.all()`` make it a predicate."""

    def __init__(self, fn: Callable[[Any], torch.Tensor], description: str, keys: frozenset):
        self._fn = fn
        self._description = description
        self._keys = keys

    def any(self) -> TrajectoryPredicate:
        """True when the comparison holds for at least one transition."""
        return TrajectoryPredicate(
            lambda t: self._fn(t).any(), f"{self._description}.any()", self._keys
        )

    def all(self) -> TrajectoryPredicate:
        """True when the comparison holds for every transition."""
        return TrajectoryPredicate(
            lambda t: self._fn(t).all(), f"{self._description}.all()", self._keys
        )

    def __call__(self, trajectory: Any = None) -> bool:
        raise ambiguous_error(self._description)

    def __repr__(self) -> str:
        return f"ElementwiseComparison({self._description})"


class _Expression:
    """A value computed from a trajectory; comparing it gives ``_result`` objects."""

    _result: type

    def __init__(self, fn: Callable[[Any], Any], description: str, keys: frozenset) -> None:
        self._fn = fn
        self._description = description
        self._keys = keys

    def _compare(self, op: Callable[[Any, Any], Any], other: Any) -> Any:
        return self._result(
            lambda t: op(self._fn(t), other),
            f"({self._description} {_SYMBOLS[op]} {other!r})",
            self._keys,
        )

    def __gt__(self, other: Any) -> Any:
        return self._compare(operator.gt, other)

    def __ge__(self, other: Any) -> Any:
        return self._compare(operator.ge, other)

    def __lt__(self, other: Any) -> Any:
        return self._compare(operator.lt, other)

    def __le__(self, other: Any) -> Any:
        return self._compare(operator.le, other)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(operator.eq, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(operator.ne, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return self._description


class _Scalar(_Expression):
    """One value per trajectory (a reduction, the length): comparisons are predicates."""

    _result = TrajectoryPredicate


class _Field(_Expression):
    """An entry of every transition: comparisons are elementwise, reductions scalars."""

    _result = ElementwiseComparison

    def __init__(self, key: NestedKey, description: str) -> None:
        self._key = key
        super().__init__(self._read, description, frozenset({unravel_key(key)}))

    def _read(self, trajectory: Any) -> torch.Tensor:
        value = trajectory.get(self._key)
        if value is None:
            raise KeyError(
                f"the trajectory has no entry {self._key!r} (looked up the root and ('next', ...))."
            )
        return value

    def _reduced(self, fn: Callable[[torch.Tensor], Any], name: str) -> _Scalar:
        return _Scalar(lambda t: fn(self._read(t)), f"{self._description}.{name}()", self._keys)

    def sum(self) -> _Scalar:
        """The sum over the trajectory."""
        return self._reduced(torch.sum, "sum")

    def mean(self) -> _Scalar:
        """The mean over the trajectory (as float)."""
        return self._reduced(lambda x: x.float().mean(), "mean")

    def max(self) -> _Scalar:
        """The largest value over the trajectory."""
        return self._reduced(torch.max, "max")

    def min(self) -> _Scalar:
        """The smallest value over the trajectory."""
        return self._reduced(torch.min, "min")

    def first(self) -> _Scalar:
        """The value at the first transition."""
        return self._reduced(lambda x: x[0], "first")

    def last(self) -> _Scalar:
        """The value at the last transition."""
        return self._reduced(lambda x: x[-1], "last")


class TrajRef:
    """The root of query expressions; use the module's :data:`traj` instance.

    Examples:
        >>> from rl_buffers import traj
        >>> ((traj.reward > 10).any() | (traj.length >= 50)).required_keys()
        frozenset({'reward'})
        >>> traj["collector", "traj_ids"].first() == 3
        TrajectoryPredicate((traj[('collector', 'traj_ids')].first() == 3))
    """

    @property
    def length(self) -> _Scalar:
        """The number of transitions."""
        return _Scalar(lambda t: t.length, "traj.length", frozenset())

    @property
    def total_reward(self) -> _Scalar:
        """The sum of the rewards."""
        return _Scalar(lambda t: t.total_reward, "traj.total_reward", frozenset({"reward"}))

    def __getattr__(self, name: str) -> _Field:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Field(name, f"traj.{name}")

    def __getitem__(self, key: NestedKey) -> _Field:
        return _Field(key, f"traj[{key!r}]")

    def __repr__(self) -> str:
        return "traj"


traj = TrajRef()
