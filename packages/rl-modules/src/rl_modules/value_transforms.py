"""Invertible squashings of value targets (the ``h`` of R2D2 / MuZero, DreamerV3's symlog).

A critic trained on ``h(G)`` instead of the return ``G`` sees targets of a
bounded-ish scale whatever the reward scale; predictions map back with ``h^-1``.
"""

from __future__ import annotations

import torch
from torch import nn

from rl_modules.model_based.functional import odd_extension, symexp, symlog


def _check_epsilon(epsilon: float) -> None:
    if not epsilon > 0:
        raise ValueError(
            f"signed_hyperbolic: epsilon must be positive (it keeps h invertible), got {epsilon}."
        )


def signed_hyperbolic(value: torch.Tensor, epsilon: float = 1e-3) -> torch.Tensor:
    """``h(x) = sign(x) (sqrt(|x| + 1) - 1) + epsilon x`` (Pohlen et al., 2018, "Observe and Look Further").

    Examples:
        >>> signed_hyperbolic(torch.tensor([-3.0, 0.0, 3.0]), epsilon=1e-3)
        tensor([-1.0030,  0.0000,  1.0030])
    """
    _check_epsilon(epsilon)
    return odd_extension(lambda u: torch.sqrt(u + 1) - 1, value) + epsilon * value


def signed_parabolic(value: torch.Tensor, epsilon: float = 1e-3) -> torch.Tensor:
    """The inverse of :func:`signed_hyperbolic`.

    Solving ``h = sqrt(|x| + 1) - 1 + epsilon |x|`` for ``s = sqrt(|x| + 1)`` gives
    ``s = 2 (|h| + 1 + epsilon) / (1 + sqrt(1 + 4 epsilon (|h| + 1 + epsilon)))`` (the
    quadratic root written without cancellation), and ``|x| = s^2 - 1``.

    Examples:
        >>> x = torch.tensor([-50.0, 0.5, 7.0], dtype=torch.float64)
        >>> torch.allclose(signed_parabolic(signed_hyperbolic(x)), x)
        True
    """
    _check_epsilon(epsilon)

    def magnitude(h: torch.Tensor) -> torch.Tensor:
        c = h + 1 + epsilon
        s = 2 * c / (1 + torch.sqrt(1 + 4 * epsilon * c))
        return s * s - 1

    return odd_extension(magnitude, value)


class ValueTransform(nn.Module):
    """Base of invertible value transforms: ``forward`` is ``h``, :meth:`inverse` is ``h^-1``.

    Subclasses define both; the base class itself cannot be instantiated.
    """

    def __init__(self) -> None:
        if type(self) is ValueTransform:
            raise TypeError(
                "ValueTransform is abstract: use a subclass (SymLogValueTransform, "
                "SignedHyperbolicValueTransform, ...) or subclass it with forward and inverse."
            )
        super().__init__()

    def inverse(self, value: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} must define inverse().")


class IdentityValueTransform(ValueTransform):
    """``h(x) = x``.

    Examples:
        >>> IdentityValueTransform()(torch.tensor([2.0]))
        tensor([2.])
    """

    def forward(self, value: torch.Tensor) -> torch.Tensor:
        return value

    def inverse(self, value: torch.Tensor) -> torch.Tensor:
        return value


class SymLogValueTransform(ValueTransform):
    """``h = symlog``, ``h^-1 = symexp`` (DreamerV3).

    Examples:
        >>> t = SymLogValueTransform()
        >>> t.inverse(t(torch.tensor([-20.0, 3.0]))).round()
        tensor([-20.,   3.])
    """

    def forward(self, value: torch.Tensor) -> torch.Tensor:
        return symlog(value)

    def inverse(self, value: torch.Tensor) -> torch.Tensor:
        return symexp(value)


class SignedHyperbolicValueTransform(ValueTransform):
    """``h = signed_hyperbolic``, ``h^-1 = signed_parabolic`` (R2D2, MuZero).

    Args:
        epsilon: the linear term that keeps ``h`` Lipschitz-invertible (positive).

    Examples:
        >>> t = SignedHyperbolicValueTransform()
        >>> t.inverse(t(torch.tensor([-20.0, 3.0]))).round()
        tensor([-20.,   3.])
    """

    def __init__(self, epsilon: float = 1e-3) -> None:
        super().__init__()
        _check_epsilon(epsilon)
        self.epsilon = epsilon

    def forward(self, value: torch.Tensor) -> torch.Tensor:
        return signed_hyperbolic(value, self.epsilon)

    def inverse(self, value: torch.Tensor) -> torch.Tensor:
        return signed_parabolic(value, self.epsilon)

    def extra_repr(self) -> str:
        return f"epsilon={self.epsilon}"


class ComposeValueTransform(ValueTransform):
    """Apply transforms in order; the inverse undoes them in reverse order.

    Args:
        *transforms: one or more :class:`ValueTransform` instances.

    Examples:
        >>> t = ComposeValueTransform(SignedHyperbolicValueTransform(), SymLogValueTransform())
        >>> t.inverse(t(torch.tensor([5.0], dtype=torch.float64))).round()
        tensor([5.], dtype=torch.float64)
    """

    def __init__(self, *transforms: ValueTransform) -> None:
        super().__init__()
        if not transforms:
            raise ValueError("ComposeValueTransform needs at least one ValueTransform.")
        for t in transforms:
            if not isinstance(t, ValueTransform):
                raise TypeError(
                    f"ComposeValueTransform takes ValueTransform instances, got {type(t).__name__}."
                )
        self.transforms = nn.ModuleList(transforms)

    def forward(self, value: torch.Tensor) -> torch.Tensor:
        for t in self.transforms:
            value = t(value)
        return value

    def inverse(self, value: torch.Tensor) -> torch.Tensor:
        for t in reversed(self.transforms):
            value = t.inverse(value)
        return value
