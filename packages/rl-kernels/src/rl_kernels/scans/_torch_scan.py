"""The torch fallback: ``y[t] = x[t] + g[t] * y[t + 1]`` over time-major ``[T, N]`` tensors.

Very short sequences run a plain reverse loop (one fused ``addcmul`` per step
on all ``N`` columns). Small inputs use a doubling scan: after the step with
shift ``s`` each ``y[t]`` holds the sum over the next ``2 s`` steps and ``a[t]``
their discount product; ``log2 T`` steps of three small kernels. Large inputs
(where memory traffic matters more than launches) use a two-level blocked scan
with blocks of ``C ~ sqrt(T)`` steps, laid out as ``[T // C, C, N]``:

1. a reverse loop over the ``C`` positions, vectorised over every block, solves
   each block with a zero boundary (``local``);
2. ``P[b, c]``, the product of ``g`` from position ``c`` to the block's end, comes
   from a second loop (products only, so zeros at episode ends stay exact);
3. a loop over the ``T // C`` blocks carries ``y`` at each block's start into
   the block before it;
4. one fused ``local + P * carry`` finishes every step.

That is ``~3 sqrt(T)`` kernels instead of ``T``, each writing into
preallocated memory. The remainder ``T % C`` (the last steps) is a plain loop.
Both formulations use only products and sums of the discounts (no division),
so episode ends and long horizons are exact.
"""

from __future__ import annotations

import math

import torch

__all__ = ["reverse_scan_time_major"]

#: Up to this many steps the plain loop is the fastest.
LOOP_MAX_STEPS = 8
#: Inputs with at most this many elements use the doubling scan.
DOUBLING_MAX_NUMEL = 32768


def _loop_into(
    x: torch.Tensor, g: torch.Tensor, y: torch.Tensor, carry: torch.Tensor | None
) -> None:
    """Reverse loop along dim 0 writing into ``y``; ``carry`` is ``y`` after the last step."""
    last = x.shape[0] - 1
    if carry is None:
        y[last].copy_(x[last])
    else:
        torch.addcmul(x[last], g[last], carry, out=y[last])
    for t in range(last - 1, -1, -1):
        torch.addcmul(x[t], g[t], y[t + 1], out=y[t])


def _doubling(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Log-depth scan along dim 0 with ping-pong buffers for ``y`` and for ``a``.

    ``y`` carries ``T`` zero steps after the last one, so ``y[t + shift]`` past the end
    reads zero and the final positions need no copying from step to step.
    """
    steps = x.shape[0]
    y = x.new_zeros((2 * steps, *x.shape[1:]))
    y[:steps].copy_(x)
    y_next = torch.zeros_like(y)
    # stale entries of ``a`` are only ever multiplied by the zero padding: keep them finite
    a, a_next = g, torch.zeros_like(x)
    shift = 1
    while shift < steps:
        torch.addcmul(y[:steps], a, y[shift : shift + steps], out=y_next[:steps])
        if 2 * shift < steps:
            # only the first steps - 2 * shift products are read by the next step
            head = steps - 2 * shift
            torch.mul(a[:head], a[shift : shift + head], out=a_next[:head])
            a, a_next = a_next, (a if a is not g else torch.zeros_like(x))
        y, y_next = y_next, y
        shift *= 2
    return y[:steps]


def reverse_scan_time_major(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Solve ``y[t] = x[t] + g[t] * y[t + 1]`` along dim 0 with ``y[T] = 0``.

    Args:
        x: ``[T, N]`` inputs (contiguous time-major is fastest; any strides work).
        g: ``[T, N]`` discounts, same dtype.

    Returns:
        a new contiguous ``[T, N]`` tensor ``y``.

    Examples:
        >>> x = torch.ones(4, 1)
        >>> reverse_scan_time_major(x, torch.full_like(x, 0.5)).squeeze(-1)
        tensor([1.8750, 1.7500, 1.5000, 1.0000])
    """
    steps = x.shape[0]
    if steps > LOOP_MAX_STEPS and x.numel() <= DOUBLING_MAX_NUMEL:
        return _doubling(x, g)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if steps <= LOOP_MAX_STEPS:
        _loop_into(x, g, y, None)
        return y
    block = max(2, math.isqrt(steps))
    n_blocks = steps // block
    full = n_blocks * block
    carry = None
    if full < steps:  # the trailing remainder first: it feeds the last block
        _loop_into(x[full:], g[full:], y[full:], None)
        carry = y[full]
    lead = x.shape[1:]
    xb = x[:full].reshape(n_blocks, block, *lead)
    gb = g[:full].reshape(n_blocks, block, *lead)
    yb = y[:full].view(n_blocks, block, *lead)
    # 1. every block solved with a zero boundary, all blocks at once
    yb[:, block - 1].copy_(xb[:, block - 1])
    for c in range(block - 2, -1, -1):
        torch.addcmul(xb[:, c], gb[:, c], yb[:, c + 1], out=yb[:, c])
    # 2. suffix products of g inside each block (a loop: cumprod over a middle dim is slow)
    prod = torch.empty_like(yb)
    prod[:, block - 1].copy_(gb[:, block - 1])
    for c in range(block - 2, -1, -1):
        torch.mul(gb[:, c], prod[:, c + 1], out=prod[:, c])
    # 3. the value entering each block from the one after it
    incoming = torch.zeros((n_blocks, *lead), dtype=x.dtype, device=x.device)
    if carry is not None:
        incoming[n_blocks - 1].copy_(carry)
    for b in range(n_blocks - 1, 0, -1):
        torch.addcmul(yb[b, 0], prod[b, 0], incoming[b], out=incoming[b - 1])
    # 4. add each block's incoming value, discounted to every position
    yb.addcmul_(prod, incoming.unsqueeze(1))
    return y
