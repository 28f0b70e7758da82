"""Distributions with a deterministic mode (``deterministic_sample``)."""

from rl_modules.distributions.delta import Delta, TanhDelta
from rl_modules.distributions.discrete import (
    MaskedCategorical,
    MaskedOneHotCategorical,
    OneHotCategorical,
)
from rl_modules.distributions.normal import IndependentNormal, TruncatedNormal
from rl_modules.distributions.ordinal import OneHotOrdinal, Ordinal, ordinal_logits
from rl_modules.distributions.safe_tanh import SafeTanhTransform, safeatanh, safetanh
from rl_modules.distributions.tanh_normal import TanhNormal

__all__ = [
    "Delta",
    "IndependentNormal",
    "MaskedCategorical",
    "MaskedOneHotCategorical",
    "OneHotCategorical",
    "OneHotOrdinal",
    "Ordinal",
    "SafeTanhTransform",
    "TanhDelta",
    "TanhNormal",
    "TruncatedNormal",
    "ordinal_logits",
    "safeatanh",
    "safetanh",
]
