"""Specs: the shape, dtype, device and domain of every entry an env reads or writes.

One file per spec family. Every spec offers ``shape``, ``dtype``, ``device``,
``rand``, ``zero``, ``one``, ``is_in``, ``explain``, ``project``, ``encode``,
``expand``, ``to``, ``clone`` and ``==``; :class:`Composite` nests them.
"""

from rl_envs.specs._base import TensorSpec
from rl_envs.specs._dtypes import to_numpy_dtype, to_torch_dtype
from rl_envs.specs._spaces import CategoricalBox, ContinuousBox, MultiCategoricalBox
from rl_envs.specs.binary import Binary
from rl_envs.specs.bounded import Bounded
from rl_envs.specs.categorical import Categorical
from rl_envs.specs.composite import Composite
from rl_envs.specs.from_td import make_composite_from_td
from rl_envs.specs.multi_categorical import MultiCategorical
from rl_envs.specs.multi_one_hot import MultiOneHot
from rl_envs.specs.non_tensor import NonTensor
from rl_envs.specs.one_hot import OneHot
from rl_envs.specs.unbounded import Unbounded

__all__ = [
    "Binary",
    "Bounded",
    "Categorical",
    "CategoricalBox",
    "Composite",
    "ContinuousBox",
    "MultiCategorical",
    "MultiCategoricalBox",
    "MultiOneHot",
    "NonTensor",
    "OneHot",
    "TensorSpec",
    "Unbounded",
    "make_composite_from_td",
    "to_numpy_dtype",
    "to_torch_dtype",
]
