"""``tanh`` and ``atanh`` kept strictly inside ``(-1, 1)``, with gradients that pass the clamp."""

from __future__ import annotations

from typing import Any

import torch
from torch import autograd
from torch import distributions as D
from torch.torch_version import TorchVersion

#: True when the installed torch predates 2.6, the release from which TorchRL compiles
#: the safe-tanh path with ``fullgraph=True`` (TorchRL's name; this package needs torch 2.10+,
#: so it is False wherever the package installs).
TORCH_VERSION_PRE_2_6: bool = TorchVersion(torch.__version__) < (2, 6)


class _SafeTanh(autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, eps: float) -> torch.Tensor:
        return x.tanh().clamp(-1.0 + eps, 1.0 - eps)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (y,) = ctx.saved_tensors
        return grad * (1 - y.pow(2)), None


class _SafeAtanh(autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(y: torch.Tensor, eps: float) -> torch.Tensor:
        return y.clamp(-1.0 + eps, 1.0 - eps).atanh()

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
        ctx.save_for_backward(inputs[0].clamp(-1.0 + inputs[1], 1.0 - inputs[1]))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (y,) = ctx.saved_tensors
        return grad / (1 - y.pow(2)), None


def _eps(x: torch.Tensor, eps: float | None) -> float:
    return torch.finfo(x.dtype).resolution if eps is None else float(eps)


def safetanh(x: torch.Tensor, eps: float | None = None) -> torch.Tensor:
    """``tanh(x)`` clamped to ``[-1 + eps, 1 - eps]``; the gradient is ``1 - y**2`` of the clamped ``y``.

    So ``safeatanh(safetanh(x))`` has gradient 1 even where ``tanh`` saturates (a plain
    clamp would give 0 there). ``eps`` defaults to the dtype's resolution. Works under
    ``torch.vmap``.

    Examples:
        >>> x = torch.tensor([0.0, 20.0], requires_grad=True)
        >>> y = safetanh(x, 1e-6)
        >>> bool(y[1] < 1.0)
        True
    """
    return _SafeTanh.apply(x, _eps(x, eps))


def safeatanh(y: torch.Tensor, eps: float | None = None) -> torch.Tensor:
    """``atanh`` of ``y`` clamped to ``[-1 + eps, 1 - eps]`` (finite at ``+-1``); gradient ``1 / (1 - y**2)``.

    Examples:
        >>> bool(torch.isfinite(safeatanh(torch.tensor([1.0]), 1e-6)).all())
        True
    """
    return _SafeAtanh.apply(y, _eps(y, eps))


class SafeTanhTransform(D.TanhTransform):
    """``torch.distributions.TanhTransform`` with :func:`safetanh` / :func:`safeatanh`.

    Forward and inverse stay finite for any input (``inv(+-1)`` is finite), and the
    forward gradient equals ``tanh``'s.

    Examples:
        >>> t = SafeTanhTransform()
        >>> bool(torch.isfinite(t.inv(torch.tensor([1.0, -1.0]))).all())
        True
    """

    def _call(self, x: torch.Tensor) -> torch.Tensor:
        return safetanh(x)

    def _inverse(self, y: torch.Tensor) -> torch.Tensor:
        return safeatanh(y)
