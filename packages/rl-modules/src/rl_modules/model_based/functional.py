"""Scalar transforms and two-hot codes of DreamerV3 (Hafner et al., 2023, arXiv:2301.04104).

Pure tensor functions: ``symlog`` / ``symexp`` squash and unsquash values of any scale,
``two_hot_encode`` / ``two_hot_decode`` / ``two_hot_cross_entropy`` turn a scalar into a
categorical target over a fixed support (``default_bins``: ``symexp`` of an even grid on
``[-20, 20]``), so a network can regress rewards and returns of unknown scale with a
cross-entropy loss.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = [
    "default_bins",
    "straight_through_categorical",
    "symexp",
    "symlog",
    "two_hot_cross_entropy",
    "two_hot_decode",
    "two_hot_encode",
    "unimix_probs",
]

DEFAULT_NUM_BINS = 255
DEFAULT_BIN_RANGE = 20.0


def odd_extension(f: Callable[[torch.Tensor], torch.Tensor], value: torch.Tensor) -> torch.Tensor:
    """``sign(x) f(|x|)`` for an ``f`` with ``f(0) = 0``, whose autograd gradient at 0 is ``f'(0)``.

    ``sign(x) * f(x.abs())`` has gradient 0 at ``x = 0`` (``sign``, ``abs`` and
    ``clamp`` all pass no gradient there); this form feeds each branch of a
    ``where`` only the inputs of its own sign (0 elsewhere, inside ``f``'s domain).
    """
    neg = value < 0
    return torch.where(neg, -f(torch.where(neg, -value, 0.0)), f(torch.where(neg, 0.0, value)))


def symlog(value: torch.Tensor) -> torch.Tensor:
    """``sign(x) * log(1 + |x|)``, element-wise (DreamerV3, eq. 1).

    Examples:
        >>> symlog(torch.tensor([-(torch.e - 1), 0.0, torch.e - 1]))
        tensor([-1.,  0.,  1.])
    """
    return odd_extension(torch.log1p, value)


def symexp(value: torch.Tensor) -> torch.Tensor:
    """``sign(x) * (exp(|x|) - 1)``, the inverse of :func:`symlog`.

    Examples:
        >>> symexp(symlog(torch.tensor([-50.0, 3.0]))).round()
        tensor([-50.,   3.])
    """
    return odd_extension(torch.expm1, value)


def default_bins(
    num_bins: int = DEFAULT_NUM_BINS,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """DreamerV3's support: ``symexp`` of ``num_bins`` evenly spaced points of ``[-20, 20]``.

    The support is exactly antisymmetric (``bins == -bins.flip(0)``), so a zero target
    decodes to zero.

    Examples:
        >>> default_bins(5)
        tensor([-4.8517e+08, -2.2025e+04,  0.0000e+00,  2.2025e+04,  4.8517e+08])
    """
    if num_bins < 2:
        raise ValueError(f"num_bins must be at least 2, got {num_bins}.")
    grid = torch.linspace(
        -DEFAULT_BIN_RANGE, DEFAULT_BIN_RANGE, num_bins, device=device, dtype=torch.float64
    )
    bins = symexp(grid)
    bins = (bins - bins.flip(0)) / 2
    return bins.to(dtype or torch.get_default_dtype())


def _check_bins(bins: torch.Tensor) -> None:
    if bins.ndim != 1 or bins.numel() < 2:
        raise ValueError(
            f"bins must be a 1-d ascending tensor with at least 2 values, got shape "
            f"{tuple(bins.shape)}."
        )


def two_hot_encode(x: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """Two-hot code of ``x`` on ``bins``: weights on the two neighbouring bins, linear in ``x``.

    Values beyond the support saturate at its ends.

    Args:
        x: raw scalars, any shape.
        bins: ascending 1-d support.

    Returns:
        ``[*x.shape, len(bins)]``, each row summing to one, with ``(code * bins).sum(-1) == x``
        inside the support.

    Examples:
        >>> two_hot_encode(torch.tensor([0.25]), torch.tensor([-1.0, 0.0, 1.0]))
        tensor([[0.0000, 0.7500, 0.2500]])
    """
    _check_bins(bins)
    bins = bins.to(device=x.device, dtype=x.dtype)
    n = bins.numel()
    x = x.clamp(bins[0], bins[-1])
    below = torch.searchsorted(bins, x.contiguous(), right=True) - 1
    below = below.clamp(0, n - 2)
    lo, hi = bins[below], bins[below + 1]
    w_hi = (x - lo) / (hi - lo)
    code = torch.zeros(*x.shape, n, device=x.device, dtype=x.dtype)
    code.scatter_(-1, below.unsqueeze(-1), (1 - w_hi).unsqueeze(-1))
    code.scatter_add_(-1, (below + 1).unsqueeze(-1), w_hi.unsqueeze(-1))
    return code


def two_hot_decode(logits: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """The expected value ``sum(softmax(logits) * bins)``, trailing bin dim removed.

    Examples:
        >>> bins = torch.tensor([-1.0, 0.0, 1.0])
        >>> two_hot_decode(torch.tensor([[0.0, 0.0, 0.0]]), bins)
        tensor([0.])
    """
    _check_bins(bins)
    if logits.shape[-1] != bins.numel():
        raise ValueError(
            f"two_hot_decode: logits have {logits.shape[-1]} bins in their last dim, the "
            f"support has {bins.numel()}. Size the head's output to len(bins)."
        )
    probs = torch.softmax(logits, dim=-1)
    return (probs * bins.to(device=logits.device, dtype=logits.dtype)).sum(-1)


def two_hot_cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, bins: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy between ``softmax(logits)`` and the two-hot code of ``target``.

    Args:
        logits: ``[*B, len(bins)]``.
        target: raw scalars ``[*B]`` or ``[*B, 1]``.
        bins: ascending 1-d support.

    Returns:
        ``[*B]`` unreduced losses.

    Examples:
        >>> two_hot_cross_entropy(torch.zeros(2, 3), torch.zeros(2), torch.tensor([-1.0, 0, 1]))
        tensor([1.0986, 1.0986])
    """
    if target.shape == (*logits.shape[:-1], 1):
        target = target.squeeze(-1)
    if target.shape != logits.shape[:-1]:
        raise ValueError(
            f"two_hot_cross_entropy: target has shape {tuple(target.shape)}, expected "
            f"{tuple(logits.shape[:-1])} or {(*logits.shape[:-1], 1)} to match logits of shape "
            f"{tuple(logits.shape)}."
        )
    code = two_hot_encode(target.detach(), bins)
    return -(code * torch.log_softmax(logits, dim=-1)).sum(-1)


def unimix_probs(logits: torch.Tensor, unimix: float) -> torch.Tensor:
    """``(1 - unimix) * softmax(logits) + unimix / K``: DreamerV3's 1% uniform mixture.

    Examples:
        >>> unimix_probs(torch.tensor([0.0, 100.0]), 0.1)
        tensor([0.0500, 0.9500])
    """
    if not 0 <= unimix < 1:
        raise ValueError(f"unimix must be in [0, 1), got {unimix}.")
    probs = torch.softmax(logits, dim=-1)
    if unimix:
        probs = (1 - unimix) * probs + unimix / logits.shape[-1]
    return probs


def straight_through_categorical(
    logits: torch.Tensor, unimix: float = 0.0, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """A one-hot sample of ``Cat(unimix_probs(logits))`` with straight-through gradients.

    The forward value is the hard one-hot sample; the gradient is that of the
    probabilities (Bengio et al., 2013; DreamerV2/V3).

    Args:
        logits: ``[*B, num_categoricals, num_classes]`` (any ``[..., K]``).
        unimix: uniform mixture weight in ``[0, 1)``.
        generator: optional RNG for the sample.

    Returns:
        A tensor shaped like ``logits``.

    Examples:
        >>> s = straight_through_categorical(torch.randn(4, 3, 5))
        >>> s.sum(-1)
        tensor([[1., 1., 1.],
                [1., 1., 1.],
                [1., 1., 1.],
                [1., 1., 1.]])
    """
    probs = unimix_probs(logits, unimix)
    flat = probs.detach().reshape(-1, probs.shape[-1])
    index = torch.multinomial(flat, 1, generator=generator).reshape(*probs.shape[:-1], 1)
    one_hot = torch.zeros_like(probs).scatter_(-1, index, 1.0)
    return probs + (one_hot - probs).detach()
