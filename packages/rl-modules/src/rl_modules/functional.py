"""Element-wise value squashings and their inverses, as plain functions.

Examples:
    >>> import torch
    >>> from rl_modules import functional as F
    >>> F.symexp(F.symlog(torch.tensor([4.0])))
    tensor([4.])
"""

from rl_modules.model_based.functional import symexp, symlog
from rl_modules.value_transforms import signed_hyperbolic, signed_parabolic

__all__ = ["signed_hyperbolic", "signed_parabolic", "symexp", "symlog"]
