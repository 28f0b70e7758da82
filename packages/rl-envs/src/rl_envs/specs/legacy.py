"""The spec names TorchRL used before 0.4, as deprecated aliases (seed scripts still use them).

Each old name builds the new spec and warns with a ``DeprecationWarning`` (the
category TorchRL's aliases used until they were removed after 0.10). The
object built IS the new spec: ``type(BoundedTensorSpec(...))`` is
``BoundedContinuous``/``BoundedDiscrete``, so equality, pickling and
``isinstance(spec, Bounded)`` behave as for the new name. The aliases are
subclasses of their targets (``issubclass(BoundedTensorSpec, Bounded)``), but
``isinstance(new_spec, BoundedTensorSpec)`` is ``False``.

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     spec = BoundedTensorSpec(-1.0, 1.0, shape=(2,))
    >>> type(spec).__name__, caught[0].category.__name__
    ('BoundedContinuous', 'DeprecationWarning')
"""

from __future__ import annotations

import warnings
from typing import Any

from rl_envs.specs.binary import Binary
from rl_envs.specs.bounded import Bounded
from rl_envs.specs.categorical import Categorical
from rl_envs.specs.composite import Composite
from rl_envs.specs.multi_categorical import MultiCategorical
from rl_envs.specs.multi_one_hot import MultiOneHot
from rl_envs.specs.non_tensor import NonTensor
from rl_envs.specs.one_hot import OneHot
from rl_envs.specs.stacked import Stacked, StackedComposite
from rl_envs.specs.unbounded import UnboundedContinuous, UnboundedDiscrete

__all__ = [
    "BinaryDiscreteTensorSpec",
    "BoundedTensorSpec",
    "CompositeSpec",
    "DiscreteTensorSpec",
    "LazyStackedCompositeSpec",
    "LazyStackedTensorSpec",
    "MultiDiscreteTensorSpec",
    "MultiOneHotDiscreteTensorSpec",
    "NonTensorSpec",
    "OneHotDiscreteTensorSpec",
    "UnboundedContinuousTensorSpec",
    "UnboundedDiscreteTensorSpec",
]


def _alias(old: str, target: type, new: str | None = None, **defaults: Any) -> type:
    """A subclass of ``target`` whose construction warns and returns a ``target``."""
    new = new or target.__name__

    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        warnings.warn(
            f"{old} is deprecated (TorchRL removed it); use {new} instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        for key, value in defaults.items():
            kwargs.setdefault(key, value)
        return target(*args, **kwargs)  # not an instance of cls: __init__ is not run again

    doc = f"Deprecated name of :class:`{new}`: builds one and warns (``DeprecationWarning``)."
    return type(old, (target,), {"__new__": __new__, "__doc__": doc, "__module__": __name__})


BoundedTensorSpec = _alias("BoundedTensorSpec", Bounded)
UnboundedContinuousTensorSpec = _alias(
    "UnboundedContinuousTensorSpec", UnboundedContinuous, "Unbounded"
)
UnboundedDiscreteTensorSpec = _alias(
    "UnboundedDiscreteTensorSpec", UnboundedDiscrete, "Unbounded(dtype=torch.int64)"
)
OneHotDiscreteTensorSpec = _alias("OneHotDiscreteTensorSpec", OneHot)
DiscreteTensorSpec = _alias("DiscreteTensorSpec", Categorical)
MultiOneHotDiscreteTensorSpec = _alias("MultiOneHotDiscreteTensorSpec", MultiOneHot)
MultiDiscreteTensorSpec = _alias("MultiDiscreteTensorSpec", MultiCategorical)
BinaryDiscreteTensorSpec = _alias("BinaryDiscreteTensorSpec", Binary)
CompositeSpec = _alias("CompositeSpec", Composite)
NonTensorSpec = _alias("NonTensorSpec", NonTensor)
LazyStackedTensorSpec = _alias("LazyStackedTensorSpec", Stacked)
LazyStackedCompositeSpec = _alias("LazyStackedCompositeSpec", StackedComposite)
