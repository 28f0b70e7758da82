"""``MCAdvantageSelector``: which ``grpo_size`` of an oversampled group of replies to train on."""

from __future__ import annotations

import itertools
import math
from typing import Literal

from tensordict import NestedKey, TensorDictBase

Strategy = Literal["first", "uniform", "balanced"]


def mean_inside(
    values: list[float], indices: list[int], bounds: tuple[float, float] | None
) -> bool:
    """Whether the mean of ``values[indices]`` lies strictly inside ``bounds`` (always, without bounds)."""
    if bounds is None:
        return True
    mean = sum(values[i] for i in indices) / len(indices)
    return bounds[0] < mean < bounds[1]


def spread_indices(values: list[float], k: int) -> list[int]:
    """``k`` indices spread evenly over ``values`` sorted by value (lowest and highest included)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    if k == 1:
        return [order[len(order) // 2]]
    return [order[round(j * (len(order) - 1) / (k - 1))] for j in range(k)]


class MCAdvantageSelector:
    """Picks ``group_size`` trajectories out of a group's candidates (DAPO-style oversampling).

    :class:`MCAdvantage` with ``candidate_group_size > grpo_size`` collects more
    replies per prompt than it trains on, and asks this selector which to keep. A group
    whose returns are all equal (all failed, all solved) carries no group-relative
    signal (DAPO, arXiv:2503.14476); oversampling gives it a chance to hold a useful
    subset. ``select`` returns the candidate indices, or ``None`` when no subset's mean
    return lies inside ``keep_return_bounds``.

    Strategies: ``"first"`` keeps the first ``group_size`` candidates; ``"uniform"``
    keeps candidates spread evenly over the sorted returns; ``"balanced"`` (default)
    keeps the subset whose mean return is closest to the middle of the bounds (ties:
    the widest spread of returns), searching every subset when there are at most
    ``max_combinations`` of them and swapping greedily otherwise.

    Args:
        strategy: ``"first"``, ``"uniform"`` or ``"balanced"``.
        max_combinations: the largest number of subsets the exact search scores.
        in_keys: the candidate entries :meth:`select` reads (default ``["return"]``, one
            scalar per candidate). :class:`MCAdvantage` also offers ``"trajectories"``
            (the lazily stacked candidate trajectories) to subclasses that override
            :meth:`select`.

    Raises:
        ValueError: for an unknown strategy, ``max_combinations < 1`` or empty ``in_keys``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> MCAdvantageSelector().select(
        ...     TensorDict({"return": torch.tensor([0.0, 0.0, 0.0, 1.0])}, [4]),
        ...     group_size=2, keep_return_bounds=(0.1, 0.9))
        [0, 3]
    """

    def __init__(
        self,
        strategy: Strategy = "balanced",
        *,
        max_combinations: int = 100_000,
        in_keys: list[NestedKey] | None = None,
    ) -> None:
        if strategy not in ("first", "uniform", "balanced"):
            raise ValueError(
                f"strategy must be one of 'first', 'uniform' or 'balanced', got {strategy!r}."
            )
        if max_combinations < 1:
            raise ValueError(f"max_combinations must be >= 1, got {max_combinations}.")
        if in_keys is not None and not in_keys:
            raise ValueError("in_keys must name at least one candidate entry, got an empty list.")
        self.strategy = strategy
        self.max_combinations = int(max_combinations)
        self.in_keys: list[NestedKey] = list(in_keys) if in_keys is not None else ["return"]

    def select(
        self,
        candidates: TensorDictBase,
        *,
        group_size: int,
        keep_return_bounds: tuple[float, float] | None = None,
    ) -> list[int] | None:
        """Indices of the ``group_size`` candidates to keep, or ``None`` to drop the group.

        Args:
            candidates: one entry per candidate; the built-in strategies read one scalar
                per candidate at ``in_keys[0]``.
            group_size: how many to keep.
            keep_return_bounds: exclusive ``(low, high)`` bounds on the kept subset's mean.

        Raises:
            ValueError: with fewer than ``group_size`` candidates, or not one value per candidate.
        """
        key = self.in_keys[0]
        column = candidates.get(key)
        if column.numel() != candidates.numel():
            raise ValueError(
                f"MCAdvantageSelector reads one scalar per candidate at {key!r}, got shape "
                f"{tuple(column.shape)} for {candidates.numel()} candidates; override select() "
                "to rank candidates by something else."
            )
        values = [float(v) for v in column.detach().reshape(-1).cpu()]
        if len(values) < group_size:
            raise ValueError(f"Need at least {group_size} candidates, got {len(values)}.")
        if len(values) == group_size or self.strategy == "first":
            chosen = list(range(group_size))
        elif self.strategy == "uniform" or keep_return_bounds is None:
            chosen = spread_indices(values, group_size)
        else:
            return self._balanced(values, group_size, keep_return_bounds)
        return chosen if mean_inside(values, chosen, keep_return_bounds) else None

    def _balanced(
        self, values: list[float], k: int, bounds: tuple[float, float]
    ) -> list[int] | None:
        low, high = bounds
        middle = (low + high) / 2
        if math.comb(len(values), k) <= self.max_combinations:
            best, best_score = None, None
            for subset in itertools.combinations(range(len(values)), k):
                picked = [values[i] for i in subset]
                mean = sum(picked) / k
                if not low < mean < high:
                    continue
                score = (abs(mean - middle), min(picked) - max(picked))
                if best_score is None or score < best_score:
                    best, best_score = list(subset), score
            return best
        # Too many subsets: start spread out, then swap the extreme picks for the other
        # side's candidates until the mean enters the bounds.
        chosen = spread_indices(values, k)
        if mean_inside(values, chosen, bounds):
            return chosen
        too_low = sum(values[i] for i in chosen) / k <= low
        order = sorted(range(len(values)), key=values.__getitem__, reverse=too_low)
        outgoing = sorted(chosen, key=values.__getitem__, reverse=not too_low)
        for incoming in order:
            if incoming in chosen or not outgoing:
                continue
            chosen[chosen.index(outgoing.pop(0))] = incoming
            if mean_inside(values, chosen, bounds):
                return chosen
        return None
