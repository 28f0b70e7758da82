"""Reverse scans with done masks (discounted sums, GAE, TD(lambda), V-trace): Triton and torch."""

from rl_kernels.scans.functional import (
    discounted_cumsum,
    generalized_advantage_estimate,
    reward2go,
    td_lambda_advantage_estimate,
    td_lambda_return_estimate,
    vtrace_advantage_estimate,
)

__all__ = [
    "discounted_cumsum",
    "generalized_advantage_estimate",
    "reward2go",
    "td_lambda_advantage_estimate",
    "td_lambda_return_estimate",
    "vtrace_advantage_estimate",
]
