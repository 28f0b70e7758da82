"""The entropy temperature shared by the SAC losses (Haarnoja et al. 2018, arXiv:1812.05905)."""

from __future__ import annotations

import math

import torch
from tensordict import TensorDictBase
from torch import nn

from rl_objectives._checks import NONNEGATIVE, POSITIVE, check_hyperparameter
from rl_objectives.functional import temperature_loss

__all__ = ["Temperature", "sum_to_batch"]


def sum_to_batch(x: torch.Tensor | TensorDictBase, batch_ndim: int) -> torch.Tensor:
    """Sum every dimension after the first ``batch_ndim`` (e.g. per-dim log-probs); a
    TensorDict (a composite distribution's per-head log-probs) sums over its leaves too.

    Examples:
        >>> from tensordict import TensorDict
        >>> lp = TensorDict(a=torch.ones(2, 3), b=torch.ones(2), batch_size=[2])
        >>> sum_to_batch(lp, 1)
        tensor([4., 4.])
    """
    if isinstance(x, TensorDictBase):
        return sum(sum_to_batch(leaf, batch_ndim) for leaf in x.values(True, True))
    if x.ndim > batch_ndim:
        return x.sum(tuple(range(batch_ndim, x.ndim)))
    return x


class Temperature(nn.Module):
    """``alpha = exp(log_alpha)``, learnable unless fixed, clamped to ``[min_alpha, max_alpha]``.

    Args:
        alpha_init: initial alpha.
        min_alpha: lower clamp (``None``: none).
        max_alpha: upper clamp (``None``: none).
        fixed_alpha: keep alpha constant (a buffer, not a parameter).

    Examples:
        >>> t = Temperature(alpha_init=0.5)
        >>> round(float(t.alpha()), 3)
        0.5
    """

    def __init__(
        self,
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        fixed_alpha: bool = False,
    ) -> None:
        super().__init__()
        check_hyperparameter("Temperature", "alpha_init", alpha_init, POSITIVE)
        check_hyperparameter("Temperature", "min_alpha", min_alpha, NONNEGATIVE)
        check_hyperparameter("Temperature", "max_alpha", max_alpha, POSITIVE)
        if min_alpha is not None and max_alpha is not None and min_alpha > max_alpha:
            raise ValueError(
                f"Temperature: min_alpha={min_alpha} > max_alpha={max_alpha}; "
                "give min_alpha <= max_alpha."
            )
        log_alpha = torch.tensor(math.log(alpha_init))
        if fixed_alpha:
            self.register_buffer("log_alpha", log_alpha)
        else:
            self.log_alpha = nn.Parameter(log_alpha)
        self.min_log_alpha = math.log(min_alpha) if min_alpha is not None else None
        self.max_log_alpha = math.log(max_alpha) if max_alpha is not None else None

    def alpha(self) -> torch.Tensor:
        """The detached temperature (clamping ``log_alpha`` in place when bounds are set)."""
        if self.min_log_alpha is not None or self.max_log_alpha is not None:
            with torch.no_grad():
                self.log_alpha.clamp_(self.min_log_alpha, self.max_log_alpha)
        return self.log_alpha.detach().exp()

    def loss(self, log_prob: torch.Tensor, target_entropy: float) -> torch.Tensor:
        """Per-sample ``-log_alpha * (log_prob + target_entropy)`` (``log_prob`` is detached)."""
        return temperature_loss(self.log_alpha, log_prob, target_entropy)
