"""Small helpers to call TensorDict networks: key selection, parameter swaps, action spaces."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

__all__ = [
    "action_space_name",
    "call",
    "chosen_value",
    "in_keys_of",
    "make_qvalue_networks",
    "with_params",
]


def in_keys_of(module: nn.Module) -> list[NestedKey]:
    """The ``in_keys`` of a TensorDict module, with a clear error when it has none."""
    keys = getattr(module, "in_keys", None)
    if keys is None:
        raise TypeError(
            f"{type(module).__name__} has no in_keys: losses need TensorDict modules "
            "(tensordict.nn.TensorDictModule and friends) that declare in_keys and out_keys."
        )
    return list(keys)


def with_params(
    params: TensorDictBase | None, module: nn.Module
) -> contextlib.AbstractContextManager:
    """Run ``module`` with ``params`` swapped in (its own parameters when ``None``)."""
    if params is None:
        return contextlib.nullcontext()
    return params.to_module(module, preserve_module_state=False)


def call(
    module: nn.Module, td: TensorDictBase, params: TensorDictBase | None = None
) -> TensorDictBase:
    """``module(td.select(*in_keys))`` with optional parameters; returns the module's output."""
    td_in = td.select(*in_keys_of(module), strict=False)
    with with_params(params, module):
        return module(td_in)


def make_qvalue_networks(qvalue_network: nn.Module | list[nn.Module], num: int) -> nn.ModuleList:
    """``num`` Q-networks: the given list, or copies of one network with re-drawn parameters.

    Args:
        qvalue_network: one network (copied ``num`` times; every copy after the first has its
            ``reset_parameters()`` called so the nets start different) or a list of ``num``.
        num: number of Q-networks.
    """
    if isinstance(qvalue_network, (list, tuple, nn.ModuleList)):
        nets = list(qvalue_network)
        if len(nets) != num:
            raise ValueError(
                f"got {len(nets)} Q-value networks but num_qvalue_nets={num}; pass one network "
                "(copied) or a list of exactly num_qvalue_nets networks."
            )
        return nn.ModuleList(nets)
    nets = [qvalue_network]
    for _ in range(num - 1):
        clone = copy.deepcopy(qvalue_network)
        for sub in clone.modules():
            reset = getattr(sub, "reset_parameters", None)
            if callable(reset):
                reset()
        nets.append(clone)
    return nn.ModuleList(nets)


def action_space_name(action_space: Any, network: nn.Module | None = None) -> str:
    """``"categorical"`` or ``"one_hot"`` from a string, a spec-like object or the network.

    The network is asked, as in TorchRL, for its action ``spec`` (e.g. a ``QValueActor`` built
    with ``spec=env.action_spec``) and then for an ``action_space`` attribute.
    """
    if action_space is None and network is not None:
        spec = getattr(network, "spec", None)
        spec_name = type(spec).__name__.lower().replace("_", "")
        if "onehot" in spec_name or "categorical" in spec_name:
            action_space = spec
        else:
            action_space = getattr(network, "action_space", None)
    if action_space is None:
        raise ValueError(
            "action_space is needed: pass 'categorical' (integer actions) or 'one_hot', "
            "or a spec-like object (Categorical / OneHot)."
        )
    if not isinstance(action_space, str):
        action_space = type(action_space).__name__
    name = action_space.lower().replace("-", "").replace("_", "")
    if "onehot" in name:
        return "one_hot"
    if "categorical" in name:
        return "categorical"
    raise ValueError(
        f"unsupported action_space {action_space!r}: expected 'categorical' or 'one_hot' "
        "(or a Categorical / OneHot spec)."
    )


def chosen_value(values: torch.Tensor, action: torch.Tensor, action_space: str) -> torch.Tensor:
    """Pick ``values[..., action]`` for categorical or one-hot actions; shape ``values.shape[:-1]``."""
    if action_space == "categorical":
        if action.ndim == values.ndim:
            action = action.squeeze(-1)
        return values.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
    return (values * action.to(values.dtype)).sum(-1)
