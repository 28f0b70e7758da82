"""Ordinal distributions over ordered finite sets (Tang and Agrawal, 2020, arXiv:1901.10500, eq. 4)."""

from __future__ import annotations

import torch
from torch import distributions as D
from torch.nn import functional as F

from rl_modules.distributions.discrete import OneHotCategorical


def ordinal_logits(scores: torch.Tensor) -> torch.Tensor:
    """Logits ``l_k = sum_{i<=k} log sigmoid(s_i) + sum_{i>k} log sigmoid(-s_i)`` of the ordinal parametrisation.

    Each score ``s_i`` is the log-odds of "the value is at least ``i``"; class
    ``k`` takes the "yes" of every ``i <= k`` and the "no" of every ``i > k``,
    so neighbouring classes share most terms (the order is encoded).

    Examples:
        >>> ordinal_logits(torch.zeros(3))
        tensor([-2.0794, -2.0794, -2.0794])
    """
    yes = F.logsigmoid(scores).cumsum(-1)
    no = F.logsigmoid(-scores)
    no_after = no.flip(-1).cumsum(-1).flip(-1) - no  # sum over i > k
    return yes + no_after


class Ordinal(D.Categorical):
    """A categorical over ``{0, ..., N-1}`` parametrised by ordinal scores ``[..., N]``.

    Args:
        scores: ``[..., N]`` scores (e.g. a network's output), see :func:`ordinal_logits`.

    Examples:
        >>> import torch
        >>> d = Ordinal(scores=torch.zeros(4, 5))
        >>> d.sample().shape, d.log_prob(torch.zeros(4, dtype=torch.long)).shape
        (torch.Size([4]), torch.Size([4]))
    """

    def __init__(self, scores: torch.Tensor) -> None:
        super().__init__(logits=ordinal_logits(scores), validate_args=False)


class OneHotOrdinal(OneHotCategorical):
    """The one-hot version of :class:`Ordinal` (straight-through ``rsample`` as :class:`OneHotCategorical`).

    Args:
        scores: ``[..., N]`` scores, see :func:`ordinal_logits`.

    Examples:
        >>> import torch
        >>> d = OneHotOrdinal(scores=torch.zeros(4, 5))
        >>> d.sample().shape
        torch.Size([4, 5])
    """

    def __init__(self, scores: torch.Tensor) -> None:
        super().__init__(logits=ordinal_logits(scores))
