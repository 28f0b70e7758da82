"""A reverse linear scan ``y[t] = x[t] + g[t] * y[t + 1]`` in a few vectorised kernels.

Every return and advantage in this package is an instance of this recurrence
(GAE, TD(lambda), TD(1), V-trace, reward-to-go). Two exact formulations, picked
by size (both use only products and sums of the discounts, never a division,
so zeros at episode ends and long horizons are exact and cannot overflow):

* **Doubling** (small inputs, ``x.numel() <= DOUBLING_MAX_NUMEL``): after step
  ``k`` each ``y[t]`` holds the sum over the next ``2**k`` steps and ``g[t]``
  their product; ``ceil(log2 T)`` steps of two fused kernels on the whole
  tensor. Few kernel launches, ``O(T log T)`` work: best while the data is small.
* **Blocked** (large inputs): time-major layout, blocks of ``C ~ sqrt(T)`` steps.
  A loop over the ``C`` positions of a block, vectorised over every block and
  sequence, gives each block's start value with a zero boundary; the block
  products ``prod(g)`` carry these across blocks (the same scan, ``T / C`` long);
  a second loop over ``C`` re-solves each block from its incoming carry.
  ``O(T)`` work in ``~3 sqrt(T)`` launches of contiguous kernels.

The thresholds were chosen with single-threaded CPU timings on batches
``[8..1024, 128..2048]`` (see ``benchmarks/bench_objectives.py``). Python loops
run over ``log T`` or ``sqrt(T)`` steps fixed by the shape, so ``torch.compile``
unrolls them into one graph.
"""

from __future__ import annotations

import torch

__all__ = ["reverse_linear_scan"]

#: Inputs with at most this many elements use the doubling scan, larger ones the blocked scan.
DOUBLING_MAX_NUMEL = 32768
#: Below this length the blocked scan's inner levels are a plain loop.
_LOOP_MAX_STEPS = 16


def _doubling_scan(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Log-depth scan along the last dimension (``x`` and ``g`` of one shape)."""
    steps = x.shape[-1]
    y, gain, shift = x, g, 1
    while shift < steps:
        keep = steps - shift
        head = torch.addcmul(y[..., :keep], gain[..., :keep], y[..., shift:])
        y = torch.cat([head, y[..., keep:]], dim=-1)
        if 2 * shift < steps:
            gain = torch.cat([gain[..., :keep] * gain[..., shift:], gain[..., keep:]], dim=-1)
        shift *= 2
    return y


def _loop(x: torch.Tensor, g: torch.Tensor, carry: torch.Tensor | None = None) -> torch.Tensor:
    """Reverse loop along dim 0; ``carry`` is ``y`` just after the last step (zero if ``None``)."""
    steps = x.shape[0]
    last = x[steps - 1] if carry is None else torch.addcmul(x[steps - 1], g[steps - 1], carry)
    out = [last]
    for t in range(steps - 2, -1, -1):
        out.append(torch.addcmul(x[t], g[t], out[-1]))
    out.reverse()
    return torch.stack(out, 0)


def _loop_first(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """``y[0]`` of the reverse loop along dim 0 with a zero boundary."""
    acc = x[x.shape[0] - 1]
    for t in range(x.shape[0] - 2, -1, -1):
        acc = torch.addcmul(x[t], g[t], acc)
    return acc


def _blocked_scan_time_major(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Blocked scan along dim 0 of contiguous, time-major ``x`` and ``g``."""
    steps = x.shape[0]
    if steps <= _LOOP_MAX_STEPS:
        return _loop(x, g)
    block = 2
    while block * block < steps:
        block += 1
    n_blocks = -(-steps // block)
    pad = n_blocks * block - steps
    if pad:
        # padded steps have x = 0 and g = 0: they contribute nothing and cut the carry
        zeros = x.new_zeros((pad, *x.shape[1:]))
        x, g = torch.cat([x, zeros], 0), torch.cat([g, zeros], 0)
    lead = x.shape[1:]
    # [block, n_blocks, *lead]: position inside the block first, every block side by side
    xb = x.reshape(n_blocks, block, *lead).transpose(0, 1)
    gb = g.reshape(n_blocks, block, *lead).transpose(0, 1)
    starts = _blocked_scan_time_major(_loop_first(xb, gb), gb.prod(0))
    carry = torch.cat([starts[1:], torch.zeros_like(starts[:1])], 0)
    y = _loop(xb, gb, carry).transpose(0, 1).reshape(n_blocks * block, *lead)
    return y[:steps] if pad else y


def _blocked_scan(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Blocked scan along the last dimension (copies to time-major and back)."""
    y = _blocked_scan_time_major(x.movedim(-1, 0).contiguous(), g.movedim(-1, 0).contiguous())
    return y.movedim(0, -1).contiguous()


def reverse_linear_scan(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Solve ``y[t] = x[t] + g[t] * y[t + 1]`` with ``y[T] = 0`` along the last dimension.

    Args:
        x: inputs, ``[..., T]``.
        g: discounts, broadcastable to ``x``.

    Returns:
        ``y`` with the shape of ``x``.

    Examples:
        >>> x = torch.ones(1, 4)
        >>> reverse_linear_scan(x, torch.full_like(x, 0.5))
        tensor([[1.8750, 1.7500, 1.5000, 1.0000]])
    """
    g = g.expand_as(x)
    if x.shape[-1] == 0:
        return x.clone()
    if x.numel() <= DOUBLING_MAX_NUMEL:
        return _doubling_scan(x, g)
    return _blocked_scan(x, g)
