"""Range checks of hyperparameters, run when a loss or an estimator is built (or one is set).

A discount of 1.5 or a NaN lambda does not fail: it trains on advantages that grow without
bound or are NaN. So every loss and estimator checks its numeric hyperparameters by name
when they are assigned (:class:`~rl_objectives.LossModule` and
:class:`~rl_objectives.value.ValueEstimatorBase` route their ``__setattr__`` through
:func:`check_hyperparameter`). That happens at construction and on a later
``loss.gamma = ...``, never per call: a forward pays nothing.

A tensor value is checked element-wise once, when it is assigned (one device sync then,
none in the hot path).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["ESTIMATOR_BOUNDS", "LOSS_BOUNDS", "Bound", "check_factor", "check_hyperparameter"]


@dataclass(frozen=True)
class Bound:
    """The allowed range of a numeric hyperparameter (NaN is never allowed).

    Examples:
        >>> Bound(0.0, 1.0).describe()
        'a number in [0, 1]'
        >>> Bound(0.0, low_open=True, integer=True).describe()
        'an integer > 0'
    """

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    finite: bool = True
    """Refuse +-inf even where the range is unbounded."""

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        low, high = _fmt(self.low), _fmt(self.high)
        if self.low > -math.inf and self.high < math.inf:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"{kind} in {left}{low}, {high}{right}"
        if self.low > -math.inf:
            return f"{kind} {'>' if self.low_open else '>='} {low}"
        if self.high < math.inf:
            return f"{kind} {'<' if self.high_open else '<='} {high}"
        return "a finite integer" if self.integer else "a finite number"

    def holds(self, x: float) -> bool:
        if math.isnan(x) or (self.finite and math.isinf(x)):
            return False
        if self.integer and x != int(x):
            return False
        above = x > self.low if self.low_open else x >= self.low
        below = x < self.high if self.high_open else x <= self.high
        return above and below


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


UNIT = Bound(0.0, 1.0)
POSITIVE = Bound(0.0, low_open=True)
NONNEGATIVE = Bound(0.0)
POSITIVE_INT = Bound(1.0, integer=True)
FINITE = Bound()

LOSS_BOUNDS: dict[str, Bound] = {
    "gamma": UNIT,
    "lmbda": UNIT,
    "clip_epsilon": NONNEGATIVE,  # the losses also check (eps_low, eps_high) against each other
    "entropy_coeff": NONNEGATIVE,
    "critic_coeff": NONNEGATIVE,
    "expectile": Bound(0.0, 1.0, low_open=True, high_open=True),
    "temperature": POSITIVE,  # IQL / CQL's float; the SAC losses' Temperature module is skipped
    "min_q_weight": NONNEGATIVE,
    "lagrange_thresh": FINITE,
    "num_random": POSITIVE_INT,
    "num_qvalue_nets": POSITIVE_INT,
    "sub_sample_len": POSITIVE_INT,
    "samples_mc_entropy": POSITIVE_INT,
    "samples_mc_kl": POSITIVE_INT,
    "policy_noise": NONNEGATIVE,
    "noise_clip": NONNEGATIVE,
    "alpha": NONNEGATIVE,  # TD3+BC's behaviour-cloning weight
    "gp_lambda": NONNEGATIVE,
    "free_nats": NONNEGATIVE,
    "lambda_kl": NONNEGATIVE,
    "lambda_reco": NONNEGATIVE,
    "lambda_reward": NONNEGATIVE,
    "imagination_horizon": POSITIVE_INT,
    "kl_weight": NONNEGATIVE,
    "target_entropy_weight": NONNEGATIVE,
    "dtarg": POSITIVE,
    "increment": Bound(1.0),
    "decrement": Bound(0.0, 1.0, low_open=True),
}
"""What each loss hyperparameter may be, by attribute name."""

ESTIMATOR_BOUNDS: dict[str, Bound] = {
    "gamma": UNIT,
    "lmbda": UNIT,
    "rho_thresh": Bound(0.0, low_open=True, finite=False),  # V-trace's rho-bar: inf = no clip
    "c_thresh": Bound(0.0, low_open=True, finite=False),
}
"""What each estimator hyperparameter may be, by attribute name."""


def check_hyperparameter(owner: str, name: str, value: Any, bound: Bound) -> None:
    """Raise a ``ValueError`` (``TypeError`` for a non-number) naming ``owner``'s ``name``
    when ``value`` is outside ``bound``; ``None`` and modules pass (a default, a sub-module).

    Examples:
        >>> check_hyperparameter("GAE", "gamma", 0.99, UNIT)
        >>> check_hyperparameter("GAE", "gamma", 1.5, UNIT)
        Traceback (most recent call last):
        ...
        ValueError: GAE: gamma must be a number in [0, 1], got 1.5. Pass a value in that range.
    """
    if value is None or isinstance(value, torch.nn.Module):
        return
    if isinstance(value, (tuple, list)):  # e.g. PPO's asymmetric (low, high) clip_epsilon
        for i, entry in enumerate(value):
            check_hyperparameter(owner, f"{name}[{i}]", entry, bound)
        return
    if isinstance(value, dict):  # e.g. a per-head entropy_coeff of a composite action
        for key, entry in value.items():
            check_hyperparameter(owner, f"{name}[{key!r}]", entry, bound)
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, torch.Tensor)):
        if hasattr(value, "__float__") and not isinstance(value, (bool, str)):
            value = float(value)  # numpy scalars
        else:
            raise TypeError(
                f"{owner}: {name} must be {bound.describe()}, got {value!r} "
                f"({type(value).__name__})."
            )
    if isinstance(value, torch.Tensor):
        if value.numel() == 0:
            return
        flat = value.detach().reshape(-1).double().cpu()  # one sync, at assignment only
        bad = [x for x in (float(flat.min()), float(flat.max())) if not bound.holds(x)]
        if bool(torch.isnan(flat).any()):
            bad = [math.nan]
        if bad:
            raise ValueError(
                f"{owner}: every entry of the tensor {name} must be {bound.describe()}, "
                f"got {bad[0]} among its {value.numel()} entries. Pass values in that range."
            )
        return
    if not bound.holds(float(value)):
        raise ValueError(
            f"{owner}: {name} must be {bound.describe()}, got {value!r}. "
            "Pass a value in that range."
        )


def check_factor(name: str, value: float | torch.Tensor, owner: str) -> None:
    """The functional estimators' cheap check of a discount or lambda: Python numbers only.

    A tensor is passed through unchecked (checking it would sync the device on every call);
    the estimator modules check theirs once, when it is assigned.
    """
    if isinstance(value, torch.Tensor) or 0.0 <= value <= 1.0:  # NaN fails the comparison
        return
    raise ValueError(
        f"{owner}: {name} must be a number in [0, 1], got {value!r}. Pass a value in that range."
    )
