"""Specs: the shape, dtype, device and domain of every entry an env reads or writes.

One file per spec family. Every spec offers ``shape``, ``dtype``, ``device``,
``rand``, ``zero``, ``one``, ``is_in``, ``explain``, ``project``, ``encode``,
``expand``, ``to``, ``clone`` and ``==``; :class:`Composite` nests them.
"""

from rl_envs.specs._base import TensorSpec
from rl_envs.specs._dtypes import to_numpy_dtype, to_torch_dtype
from rl_envs.specs._spaces import CategoricalBox, ContinuousBox, MultiCategoricalBox
from rl_envs.specs.binary import Binary
from rl_envs.specs.bounded import Bounded, BoundedContinuous, BoundedDiscrete
from rl_envs.specs.categorical import Categorical
from rl_envs.specs.choice import Choice
from rl_envs.specs.composite import Composite
from rl_envs.specs.from_td import make_composite_from_td
from rl_envs.specs.legacy import *  # noqa: F403  (deprecated TorchRL names)
from rl_envs.specs.legacy import __all__ as _legacy_all
from rl_envs.specs.multi_categorical import MultiCategorical
from rl_envs.specs.multi_one_hot import MultiOneHot
from rl_envs.specs.non_tensor import NonTensor
from rl_envs.specs.one_hot import OneHot
from rl_envs.specs.stacked import Stacked, StackedComposite
from rl_envs.specs.unbounded import Unbounded, UnboundedContinuous, UnboundedDiscrete

__all__ = [
    "Binary",
    "Bounded",
    "BoundedContinuous",
    "BoundedDiscrete",
    "Categorical",
    "CategoricalBox",
    "Choice",
    "Composite",
    "ContinuousBox",
    "MultiCategorical",
    "MultiCategoricalBox",
    "MultiOneHot",
    "NonTensor",
    "OneHot",
    "Stacked",
    "StackedComposite",
    "TensorSpec",
    "Unbounded",
    "UnboundedContinuous",
    "UnboundedDiscrete",
    "make_composite_from_td",
    "to_numpy_dtype",
    "to_torch_dtype",
]
__all__ += _legacy_all
