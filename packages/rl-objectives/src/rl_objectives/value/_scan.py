"""A reverse linear scan ``y[t] = x[t] + g[t] * y[t + 1]`` without a Python loop over time.

Every return and advantage in this package is an instance of this recurrence
(GAE, TD(lambda), TD(1), V-trace, reward-to-go). We solve it by blocks:

1. Cut the time axis in blocks of ``chunk`` steps. Inside a block the solution
   is a matrix product ``y_local = M @ x`` where ``M[t, k] = g[t] ... g[k-1]``
   for ``k >= t`` (zero below the diagonal). ``M`` comes from a ``cumprod`` of
   a triangular matrix: only products of the discounts, never a division, so
   zeros (episode ends) and long horizons are exact and cannot overflow.
2. The first entries of the blocks obey the same recurrence one level up, with
   ``x`` the block's local solution and ``g`` the product of its discounts;
   it is solved recursively (depth ``log_chunk(T)``, unrolled when compiled).
3. Each block adds its carry: ``y[t] = y_local[t] + (g[t] ... g[end]) * y_start[next block]``.

The work is ``O(T * chunk)`` per sequence in a few large kernels, which beats
a loop of ``T`` tiny kernels by orders of magnitude for long rollouts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["reverse_linear_scan"]

#: Block length, chosen with ``benchmarks/bench_objectives.py`` (4 to 8 are fastest on CPU).
DEFAULT_CHUNK = 8


def _solve_blocks(x: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Solve the recurrence inside each block of the last dimension.

    Args:
        x: ``[..., C]`` inputs.
        g: ``[..., C]`` discounts.

    Returns:
        ``(y_local, gain)`` where ``y_local`` solves the block with a zero
        boundary after its last step and ``gain[t] = g[t] * ... * g[C - 1]``.
    """
    size = x.shape[-1]
    upper = torch.ones(size, size, dtype=torch.bool, device=x.device).triu()
    # prods[t, j] = g[t] * ... * g[j] for j >= t (ones below the diagonal are harmless)
    expanded = g.unsqueeze(-2).expand(*g.shape[:-1], size, size)
    prods = torch.where(upper, expanded, torch.ones((), dtype=g.dtype, device=g.device))
    prods = prods.cumprod(-1)
    gain = prods[..., -1]
    # weights[t, k] = g[t] * ... * g[k - 1] for k > t, 1 on the diagonal, 0 below
    weights = torch.cat([torch.ones_like(prods[..., :1]), prods[..., :-1]], dim=-1)
    weights = weights * upper.to(weights.dtype)
    y_local = (weights @ x.unsqueeze(-1)).squeeze(-1)
    return y_local, gain


def reverse_linear_scan(
    x: torch.Tensor, g: torch.Tensor, *, chunk: int = DEFAULT_CHUNK
) -> torch.Tensor:
    """Solve ``y[t] = x[t] + g[t] * y[t + 1]`` with ``y[T] = 0`` along the last dimension.

    Args:
        x: inputs, ``[..., T]``.
        g: discounts, broadcastable to ``x``.
        chunk: block length (``>= 2``).

    Returns:
        ``y`` with the shape of ``x``.

    Examples:
        >>> x = torch.ones(1, 4)
        >>> reverse_linear_scan(x, torch.full_like(x, 0.5))
        tensor([[1.8750, 1.7500, 1.5000, 1.0000]])
    """
    if chunk < 2:
        raise ValueError(f"chunk must be >= 2, got {chunk}.")
    g = g.expand_as(x)
    steps = x.shape[-1]
    if steps <= chunk:
        return _solve_blocks(x, g)[0]
    n_blocks = -(-steps // chunk)
    pad = n_blocks * chunk - steps
    if pad:
        # padded steps have x = 0 and g = 0: they contribute nothing and cut the carry
        x = F.pad(x, (0, pad))
        g = F.pad(g, (0, pad))
    lead = x.shape[:-1]
    xb = x.reshape(*lead, n_blocks, chunk)
    gb = g.reshape(*lead, n_blocks, chunk)
    y_local, gain = _solve_blocks(xb, gb)
    starts = reverse_linear_scan(y_local[..., 0], gain[..., 0], chunk=chunk)
    next_starts = F.pad(starts[..., 1:], (0, 1))
    y = y_local + gain * next_starts.unsqueeze(-1)
    y = y.reshape(*lead, n_blocks * chunk)
    return y[..., :steps] if pad else y
