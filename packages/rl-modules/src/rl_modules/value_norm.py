"""Running normalisers of value targets, for critics whose reward scale drifts (MAPPO).

A critic trained with a :class:`ValueNorm` regresses ``normalize(prediction)`` on
``normalize(target)``: the critic loss keeps a fixed scale while returns grow.
Plug one into :class:`rl_objectives.MAPPOLoss` with ``value_norm=...``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["PopArtValueNorm", "RunningValueNorm", "ValueNorm"]


class ValueNorm(nn.Module):
    """Base of the value normalisers: a running location and scale of the value targets.

    Every method works on tensors whose trailing dims are :attr:`shape`; :meth:`update`
    reduces all the leading dims (batch, time, agents) into one set of statistics.

    Args:
        shape: shape of one value (default ``1``: values ``[..., 1]``).
        epsilon: floor of the variance.
        device: where the statistics live.
    """

    def __init__(
        self,
        *,
        shape: int | Sequence[int] = 1,
        epsilon: float = 1e-5,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.epsilon = epsilon

    def _reduce_dims(self, value: torch.Tensor) -> tuple[int, ...]:
        nd = len(self.shape)
        if value.ndim < nd or tuple(value.shape[value.ndim - nd :]) != self.shape:
            raise ValueError(
                f"{type(self).__name__}(shape={self.shape}): expected values [..., "
                f"{', '.join(map(str, self.shape))}], got {tuple(value.shape)}. Give values "
                "with the trailing shape the normaliser was built with (e.g. [*B, 1])."
            )
        return tuple(range(value.ndim - nd))

    def stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The current ``(mean, var)``, each of :attr:`shape`."""
        raise NotImplementedError

    def update(self, value_target: torch.Tensor) -> None:
        """Fold a batch of value targets into the statistics (no gradient)."""
        raise NotImplementedError

    def normalize(self, value_target: torch.Tensor) -> torch.Tensor:
        """``(x - mean) / std`` with the current statistics (differentiable in ``x``)."""
        self._reduce_dims(value_target)
        mean, var = self.stats()
        return (value_target - mean) / var.sqrt()

    def denormalize(self, normalised_value: torch.Tensor) -> torch.Tensor:
        """The inverse of :meth:`normalize`: ``x * std + mean``."""
        self._reduce_dims(normalised_value)
        mean, var = self.stats()
        return normalised_value * var.sqrt() + mean


class PopArtValueNorm(ValueNorm):
    """Debiased exponential moving averages of the targets' mean and mean square.

    The statistics of van Hasselt et al. 2016/2019 (PopArt, arXiv:1602.07714,
    arXiv:1809.04474) as used by MAPPO (Yu et al. 2022, arXiv:2103.01955): after
    ``t`` updates with batch means ``m_i``, ``mean = sum_i beta^(t-i) (1-beta) m_i /
    (1 - beta^t)`` (the zero initialisation is divided out), likewise for the mean
    square, and ``var = max(mean_sq - mean^2, epsilon)``.

    With ``output_layer`` (the critic's last ``nn.Linear``, whose output is read as a
    *normalised* value), each :meth:`update` also rescales that layer so that
    ``denormalize(output_layer(h))`` is unchanged for every input ``h`` ("Preserving
    Outputs Precisely"): ``W <- W * std_old / std_new`` and
    ``b <- (std_old * b + mean_old - mean_new) / std_new``.

    Args:
        shape: shape of one value.
        beta: decay of the averages (MAPPO's 0.99999: close to a plain running mean).
        epsilon: floor of the variance and of the debiasing term.
        device: where the statistics live.
        output_layer: optional last layer of a critic that outputs normalised values
            (its ``out_features`` must equal ``prod(shape)``).

    Examples:
        >>> import torch
        >>> norm = PopArtValueNorm(shape=1, beta=0.9)
        >>> norm.update(torch.tensor([[1.0], [3.0]]))
        >>> norm.stats()
        (tensor([2.]), tensor([1.]))
        >>> norm.denormalize(norm.normalize(torch.tensor([[5.0]])))
        tensor([[5.]])
    """

    def __init__(
        self,
        *,
        shape: int | Sequence[int] = 1,
        beta: float = 0.99999,
        epsilon: float = 1e-5,
        device: torch.device | str | None = None,
        output_layer: nn.Linear | None = None,
    ) -> None:
        super().__init__(shape=shape, epsilon=epsilon, device=device)
        if output_layer is not None and output_layer.out_features != math.prod(self.shape):
            raise ValueError(
                f"PopArtValueNorm: output_layer has {output_layer.out_features} outputs, "
                f"expected prod(shape={self.shape}) = {math.prod(self.shape)}."
            )
        # held outside the module tree: the layer belongs to the critic (and its optimizer)
        self.__dict__["output_layer"] = output_layer
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"PopArtValueNorm: beta must lie in [0, 1), got {beta}.")
        self.beta = beta
        self.register_buffer("running_mean", torch.zeros(self.shape, device=device))
        self.register_buffer("running_mean_sq", torch.zeros(self.shape, device=device))
        self.register_buffer("debiasing_term", torch.zeros((), device=device))

    @torch.no_grad()
    def update(self, value_target: torch.Tensor) -> None:
        dims = self._reduce_dims(value_target)
        x = value_target.detach().to(self.running_mean.dtype)
        layer = self.output_layer
        if layer is not None:
            if float(self.debiasing_term) == 0:  # no statistics yet: the layer's scale is (0, 1)
                old_mean = torch.zeros_like(self.running_mean)
                old_var = torch.ones_like(self.running_mean)
            else:
                old_mean, old_var = self.stats()
        mean = x.mean(dims) if dims else x
        mean_sq = x.square().mean(dims) if dims else x.square()
        self.running_mean.lerp_(mean, 1.0 - self.beta)
        self.running_mean_sq.lerp_(mean_sq, 1.0 - self.beta)
        self.debiasing_term.mul_(self.beta).add_(1.0 - self.beta)
        if layer is not None:
            new_mean, new_var = self.stats()
            old_std, new_std = old_var.sqrt().reshape(-1), new_var.sqrt().reshape(-1)
            layer.weight.mul_((old_std / new_std).unsqueeze(-1))
            if layer.bias is not None:
                shift = (old_mean - new_mean).reshape(-1)
                layer.bias.copy_((old_std * layer.bias + shift) / new_std)

    def stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        debias = self.debiasing_term.clamp_min(self.epsilon)
        mean = self.running_mean / debias
        var = (self.running_mean_sq / debias - mean.square()).clamp_min(self.epsilon)
        return mean, var


class RunningValueNorm(ValueNorm):
    """Exact mean and (population) variance of every target seen, without decay.

    Batches are merged with Chan et al.'s parallel update of ``(count, mean, M2)``
    (``M2`` = sum of squared deviations), so the result equals the statistics of
    the concatenation of all batches.

    Args:
        shape: shape of one value.
        epsilon: floor of the variance.
        device: where the statistics live.

    Examples:
        >>> import torch
        >>> norm = RunningValueNorm()
        >>> norm.update(torch.tensor([[0.0], [2.0]]))
        >>> norm.update(torch.tensor([[4.0], [6.0]]))
        >>> norm.stats()
        (tensor([3.]), tensor([5.]))
    """

    def __init__(
        self,
        *,
        shape: int | Sequence[int] = 1,
        epsilon: float = 1e-5,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(shape=shape, epsilon=epsilon, device=device)
        self.register_buffer("mean", torch.zeros(self.shape, device=device))
        self.register_buffer("m2", torch.zeros(self.shape, device=device))
        self.register_buffer("count", torch.zeros((), device=device))

    @torch.no_grad()
    def update(self, value_target: torch.Tensor) -> None:
        dims = self._reduce_dims(value_target)
        x = value_target.detach().to(self.mean.dtype)
        n = float(math.prod(x.shape[d] for d in dims)) if dims else 1.0
        if n == 0:
            return
        batch_mean = x.mean(dims) if dims else x
        batch_m2 = (x - batch_mean).square().sum(dims) if dims else torch.zeros_like(x)
        total = self.count + n
        delta = batch_mean - self.mean
        self.m2.add_(batch_m2 + delta.square() * (self.count * n / total))
        self.mean.add_(delta * (n / total))
        self.count.copy_(total)

    def stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        var = (self.m2 / self.count.clamp_min(1.0)).clamp_min(self.epsilon)
        return self.mean, var
