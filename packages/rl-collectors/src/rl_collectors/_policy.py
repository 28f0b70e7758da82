"""Small helpers around the policy: exploration type, device, in-place weight loading."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import InteractionType
from torch import nn


def resolve_exploration_type(exploration_type: InteractionType | str) -> InteractionType:
    """Accept an ``InteractionType`` (``ExplorationType``) or its name (``"random"``, ``"mode"``...)."""
    if isinstance(exploration_type, InteractionType):
        return exploration_type
    try:
        return InteractionType(str(exploration_type).lower())
    except ValueError:
        options = [t.value for t in InteractionType]
        raise ValueError(
            f"exploration_type={exploration_type!r} is not one of {options}; pass "
            "tensordict.nn.InteractionType.<NAME> or its name."
        ) from None


def policy_device_of(policy: Any) -> torch.device | None:
    """The device of the first parameter (or buffer) of a module; ``None`` if it has none."""
    if not isinstance(policy, nn.Module):
        return None
    for tensor in (*policy.parameters(), *policy.buffers()):
        return tensor.device
    return None


def module_weights(module: nn.Module) -> TensorDictBase:
    """Parameters and buffers of ``module`` as a TensorDict of plain tensors (sharing storage)."""
    return TensorDict.from_module(module).data


def load_weights_(policy: Any, source: Any) -> None:
    """Copy ``source`` (module, TensorDict of weights or state_dict) into ``policy``, in place.

    Raises:
        TypeError: if ``policy`` is not an ``nn.Module`` or ``source`` has an unknown type.
    """
    if not isinstance(policy, nn.Module):
        raise TypeError(
            f"cannot load weights into a {type(policy).__name__}: only torch.nn.Module policies "
            "have weights to update."
        )
    if isinstance(source, nn.Module):
        module_weights(policy).update_(module_weights(source))
    elif isinstance(source, TensorDictBase):
        module_weights(policy).update_(source)
    elif isinstance(source, Mapping):
        policy.load_state_dict(source)
    else:
        raise TypeError(
            "policy weights must be an nn.Module, a TensorDict (TensorDict.from_module(policy)) "
            f"or a state_dict; got {type(source).__name__}."
        )


def policy_state_dict(policy: Any) -> dict[str, torch.Tensor] | None:
    """A detached copy of the policy's ``state_dict`` (``None`` for non-module policies)."""
    if not isinstance(policy, nn.Module):
        return None
    return {k: v.detach().clone() for k, v in policy.state_dict().items()}
