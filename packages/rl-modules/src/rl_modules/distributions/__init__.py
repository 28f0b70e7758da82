"""Distributions with a deterministic mode (``deterministic_sample``)."""

from rl_modules.distributions.delta import Delta, TanhDelta
from rl_modules.distributions.discrete import (
    MaskedCategorical,
    MaskedOneHotCategorical,
    OneHotCategorical,
    ReparamGradientStrategy,
)
from rl_modules.distributions.normal import IndependentNormal, TruncatedNormal
from rl_modules.distributions.ordinal import OneHotOrdinal, Ordinal, ordinal_logits
from rl_modules.distributions.safe_tanh import (
    TORCH_VERSION_PRE_2_6,
    SafeTanhTransform,
    safeatanh,
    safetanh,
)
from rl_modules.distributions.sampling import (
    composite_entropy,
    rsample_and_log_prob,
    sample_and_log_prob,
)
from rl_modules.distributions.tanh_normal import TanhNormal

__all__ = [
    "TORCH_VERSION_PRE_2_6",
    "Delta",
    "IndependentNormal",
    "MaskedCategorical",
    "MaskedOneHotCategorical",
    "OneHotCategorical",
    "OneHotOrdinal",
    "Ordinal",
    "ReparamGradientStrategy",
    "SafeTanhTransform",
    "TanhDelta",
    "TanhNormal",
    "TruncatedNormal",
    "composite_entropy",
    "ordinal_logits",
    "rsample_and_log_prob",
    "safeatanh",
    "safetanh",
    "sample_and_log_prob",
]
