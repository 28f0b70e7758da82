"""``AddStateIndependentNormalScale``: a learned, state-independent scale next to a loc."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["AddStateIndependentNormalScale"]

_SCALE_MAPPINGS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "exp": torch.exp,
    "softplus": F.softplus,
    "biased_softplus_1.0": lambda x: F.softplus(x + 0.5413248538970947) + 1e-4,
}


class AddStateIndependentNormalScale(nn.Module):
    """Map ``loc`` to ``(loc, scale)`` where ``scale`` is a learned parameter, not a function of the state.

    PPO on continuous control commonly learns one log-std per action dimension
    (Schulman et al., 2017); this module keeps it as a parameter and broadcasts
    it to the loc's batch shape.

    Args:
        scale_shape: shape of the learned parameter (the action's shape).
        scale_mapping: ``"exp"`` (the parameter is a log-std), ``"softplus"`` or
            ``"biased_softplus_1.0"`` (scale 1 at initialisation).
        scale_lb: lower bound of the scale.
        init_value: initial value of the raw parameter.

    Example:
        >>> import torch
        >>> module = AddStateIndependentNormalScale(3)
        >>> loc, scale = module(torch.zeros(5, 3))
        >>> scale.shape, bool((scale == 1).all())
        (torch.Size([5, 3]), True)
    """

    def __init__(
        self,
        scale_shape: int | tuple[int, ...] | torch.Size,
        scale_mapping: str = "exp",
        scale_lb: float = 1e-4,
        init_value: float = 0.0,
    ) -> None:
        super().__init__()
        if scale_mapping not in _SCALE_MAPPINGS:
            raise ValueError(
                f"scale_mapping must be one of {sorted(_SCALE_MAPPINGS)}, got {scale_mapping!r}."
            )
        shape = (scale_shape,) if isinstance(scale_shape, int) else tuple(scale_shape)
        self.scale = nn.Parameter(torch.full(shape, float(init_value)))
        self.scale_mapping = scale_mapping
        self.scale_lb = scale_lb

    def forward(self, loc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if loc.shape[-self.scale.ndim :] != self.scale.shape:
            raise ValueError(
                f"AddStateIndependentNormalScale: loc's trailing shape {tuple(loc.shape)} does not "
                f"end with the scale's shape {tuple(self.scale.shape)}; build the module with "
                "scale_shape equal to the action's shape."
            )
        scale = _SCALE_MAPPINGS[self.scale_mapping](self.scale).clamp_min(self.scale_lb)
        return loc, scale.expand_as(loc)
