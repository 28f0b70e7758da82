"""Aggregate scores over seeds: mean and interquartile mean with stratified-bootstrap CIs.

The method of Agarwal et al. (2021), "Deep Reinforcement Learning at the Edge of the
Statistical Precipice" (NeurIPS, arXiv:2108.13264), as its ``rliable`` package computes it:
the point estimates are ``rliable.metrics.aggregate_mean`` / ``aggregate_iqm`` (the IQM is
``scipy.stats.trim_mean(scores, 0.25)`` over every run and task), and a 95% interval is
the percentile interval of the statistic over bootstrap replicates that resample runs
with replacement *within each task* (stratified). ``rliable.library``'s bootstrap is not
used: it imports ``arch``, whose 7.2 release fails to import with pandas 3. The resampling
below is the same one (independent run indices per task column).

Scores are a matrix ``[num_runs, num_tasks]`` (one column for a single task).

Example:
    >>> import numpy as np
    >>> scores = np.array([[0.0], [0.0], [0.0], [10.0]])
    >>> iqm(scores)
    0.0
    >>> lo, hi = bootstrap_ci(scores, mean, reps=4000, seed=0)
    >>> (float(lo), float(hi))
    (0.0, 7.5)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from rliable import metrics

Statistic = Callable[[np.ndarray], float]


def _as_matrix(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim == 1:
        scores = scores[:, None]
    if scores.ndim != 2 or scores.shape[0] == 0 or scores.shape[1] == 0:
        raise ValueError(
            "expected scores of shape [num_runs, num_tasks] (or [num_runs] for one task) "
            f"with at least one run, got shape {tuple(scores.shape)}"
        )
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN: drop the runs that have no score before aggregating")
    return scores


def mean(scores: np.ndarray) -> float:
    """Mean over every run and task (``rliable.metrics.aggregate_mean`` for one task)."""
    scores = _as_matrix(scores)
    return float(np.mean(metrics.aggregate_mean(scores)))


def iqm(scores: np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50% of every run and task score.

    ``scipy.stats.trim_mean(..., 0.25)`` as ``rliable.metrics.aggregate_iqm``: it drops
    ``floor(0.25 * n)`` scores at each end of the ``n`` sorted scores.
    """
    return float(metrics.aggregate_iqm(_as_matrix(scores)))


def bootstrap_replicates(
    scores: np.ndarray, statistic: Statistic, reps: int = 2000, seed: int = 0
) -> np.ndarray:
    """``statistic`` on ``reps`` stratified resamples: runs drawn with replacement per task.

    Args:
        scores: ``[num_runs, num_tasks]`` (or ``[num_runs]``).
        statistic: maps a ``[num_runs, num_tasks]`` matrix to a float (:func:`mean`, :func:`iqm`).
        reps: number of bootstrap replicates.
        seed: seed of the resampling (the result is a deterministic function of it).

    Returns:
        the ``[reps]`` replicated statistics.
    """
    scores = _as_matrix(scores)
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    runs, tasks = scores.shape
    rng = np.random.default_rng(seed)
    # one independent draw of run indices per task column: the strata are the tasks
    idx = rng.integers(0, runs, size=(reps, runs, tasks))
    resampled = np.take_along_axis(np.broadcast_to(scores, (reps, runs, tasks)), idx, axis=1)
    return np.array([statistic(sample) for sample in resampled])


def bootstrap_ci(
    scores: np.ndarray,
    statistic: Statistic,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of ``statistic`` over stratified bootstrap replicates.

    Returns:
        ``(low, high)``: the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2``
        quantiles (linear interpolation) of :func:`bootstrap_replicates`.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    replicates = bootstrap_replicates(scores, statistic, reps=reps, seed=seed)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(replicates, [tail, 1.0 - tail])
    return float(low), float(high)


def summarize(
    scores: np.ndarray, reps: int = 2000, confidence: float = 0.95, seed: int = 0
) -> dict[str, float]:
    """Mean and IQM with their bootstrap intervals, as one flat dict.

    Example:
        >>> sorted(summarize(np.array([1.0, 2.0, 3.0, 4.0]), reps=100))
        ['iqm', 'iqm_high', 'iqm_low', 'mean', 'mean_high', 'mean_low']
    """
    out: dict[str, float] = {}
    for name, statistic in (("mean", mean), ("iqm", iqm)):
        low, high = bootstrap_ci(scores, statistic, reps=reps, confidence=confidence, seed=seed)
        out[name], out[f"{name}_low"], out[f"{name}_high"] = statistic(scores), low, high
    return out
