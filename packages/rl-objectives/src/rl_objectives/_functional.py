"""TorchRL's ``convert_to_functional(expand_dim=, compare_against=)`` parameter sets.

A loss that keeps ``expand_dim`` copies of a network (an ensemble of critics evaluated with
``torch.vmap``), or that shares some parameters with another network, holds the parameters
as one :class:`~tensordict.nn.TensorDictParams` of leading dim ``expand_dim`` named
``<name>_params``; the network itself is a template the loss runs with those parameters.

How the copies are drawn follows TorchRL, so a user's custom initialisation survives in
their range: a parameter not shared with ``compare_against`` gets ``expand_dim`` fresh
values drawn uniformly between the original's minimum and maximum; a shared parameter is
the original's data expanded (no gradient reaches it through this network); a buffer is
repeated.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictParams
from torch import nn


def expanded_params(
    module: nn.Module, expand_dim: int | None, compare_against: Iterable[torch.Tensor] | None
) -> TensorDictParams:
    """The ``<name>_params`` of ``module`` (see the module docstring).

    Args:
        module: the network whose parameters and buffers are read.
        expand_dim: number of copies (leading dim), or ``None`` for one set, not expanded.
        compare_against: parameters that belong to another network of the loss; those are
            held detached (and expanded, not redrawn) here.

    Returns:
        A ``TensorDictParams`` whose ``nn.Parameter`` leaves are trainable.
    """
    shared = {id(p) for p in (compare_against or ())}
    source = TensorDict.from_module(module)

    def convert(value: torch.Tensor) -> torch.Tensor:
        is_param = isinstance(value, nn.Parameter)
        if expand_dim is None:
            if is_param and id(value) in shared:
                return value.data  # shared: read, never trained through this network
            return value
        if not is_param:
            return value.detach().expand(expand_dim, *value.shape).clone()
        if id(value) in shared:
            return value.data.expand(expand_dim, *value.shape)
        copies = value.detach().expand(expand_dim, *value.shape).clone()
        low, high = copies.min().item(), copies.max().item()
        return nn.Parameter(copies.uniform_(low, high))

    batch = [] if expand_dim is None else [expand_dim]
    params = source.apply(convert, batch_size=batch, filter_empty=False)
    return TensorDictParams(params, no_convert=True)


def stacked_params(modules: list[nn.Module]) -> TensorDictParams:
    """One parameter set of leading dim ``len(modules)`` from same-shaped networks.

    Each copy starts from its module's values (a list given to ``convert_to_functional``);
    parameters stay trainable, buffers stay buffers.
    """
    return TensorDict.from_modules(*modules, as_module=True, expand_identical=True)
