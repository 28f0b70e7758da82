"""Tell a TensorDict module from a plain one, and wrap the plain one (TorchRL's helpers)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from tensordict.nn import TensorDictModule, TensorDictModuleBase
from tensordict.utils import NestedKey, unravel_key_list
from torch import nn


def is_tensordict_compatible(module: nn.Module) -> bool:
    """Whether ``module`` already reads and writes a TensorDict.

    True for a ``TensorDictModuleBase`` and for any module with ``in_keys`` and
    ``out_keys`` whose ``forward`` takes one argument; False for a module with
    neither attribute (its ``forward`` takes tensors).

    Raises:
        TypeError: the module declares ``in_keys`` / ``out_keys`` but its
            ``forward`` takes several arguments (neither kind; ambiguous).

    Examples:
        >>> from torch import nn
        >>> from tensordict.nn import TensorDictModule
        >>> is_tensordict_compatible(nn.Linear(3, 4))
        False
        >>> is_tensordict_compatible(TensorDictModule(nn.Linear(3, 4), ["x"], ["y"]))
        True
    """
    if isinstance(module, TensorDictModuleBase):
        return True
    has_keys = hasattr(module, "in_keys"), hasattr(module, "out_keys")
    n_args = len(inspect.signature(module.forward).parameters)
    if all(has_keys) and n_args == 1:
        return True
    if not any(has_keys):
        return False
    raise TypeError(
        f"{type(module).__name__} defines in_keys/out_keys but its forward takes {n_args} "
        "arguments: a TensorDict module's forward takes one TensorDict and defines both "
        "in_keys and out_keys; a tensor module defines neither (wrap it with "
        "ensure_tensordict_compatible(module, in_keys=..., out_keys=...))."
    )


def _check_same_keys(which: str, declared: list[NestedKey], expected: list[NestedKey]) -> None:
    if set(declared) != set(expected):
        raise TypeError(
            f"ensure_tensordict_compatible: the module's {which} {declared} differ from the "
            f"requested {which} {expected}; pass the module's own keys or none."
        )


def ensure_tensordict_compatible(
    module: nn.Module,
    in_keys: Sequence[NestedKey] | None = None,
    out_keys: Sequence[NestedKey] | None = None,
    wrapper_type: type = TensorDictModule,
    **kwargs: Any,
) -> nn.Module:
    """``module`` itself if it is TensorDict-compatible, else ``wrapper_type(module, ...)``.

    A compatible module is returned as is, after checking that any given
    ``in_keys`` / ``out_keys`` are its own (as sets). A tensor module is wrapped;
    its ``forward`` argument names must then be exactly ``in_keys``.

    Args:
        module: an ``nn.Module``.
        in_keys: the entries ``forward``'s arguments are read from.
        out_keys: the entries its outputs are written to.
        wrapper_type: the wrapping class (``TensorDictModule``).
        **kwargs: more arguments of ``wrapper_type``.

    Raises:
        TypeError: a key mismatch, ``module`` is not an ``nn.Module``, or the
            argument names of ``forward`` are not ``in_keys``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Affine(torch.nn.Module):
        ...     def forward(self, x):
        ...         return 2 * x + 1
        >>> m = ensure_tensordict_compatible(Affine(), in_keys=["x"], out_keys=["y"])
        >>> m(TensorDict(x=torch.zeros(2)))["y"]
        tensor([1., 1.])
    """
    in_keys = unravel_key_list(list(in_keys)) if in_keys else None
    out_keys = unravel_key_list(list(out_keys)) if out_keys else None
    if not isinstance(module, nn.Module):
        raise TypeError(
            f"ensure_tensordict_compatible takes an nn.Module (or a TensorDict module), got "
            f"{type(module).__name__}."
        )
    if is_tensordict_compatible(module):
        if in_keys is not None:
            _check_same_keys("in_keys", list(module.in_keys), in_keys)
        if out_keys is not None:
            _check_same_keys("out_keys", list(module.out_keys), out_keys)
        return module
    arg_names = list(inspect.signature(module.forward).parameters)
    if in_keys is not None and set(arg_names) != set(in_keys):
        raise TypeError(
            f"ensure_tensordict_compatible: {type(module).__name__}.forward takes {arg_names} "
            f"but in_keys are {in_keys}; the argument names must be the in_keys one to one "
            "(or write a TensorDictModule yourself)."
        )
    if in_keys is not None:
        kwargs["in_keys"] = in_keys
    if out_keys is not None:
        kwargs["out_keys"] = out_keys
    return wrapper_type(module, **kwargs)
