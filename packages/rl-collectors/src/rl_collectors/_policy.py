"""Small helpers around the policy: exploration type, device, in-place weight loading."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import InteractionType, TensorDictModule
from torch import nn

from rl_collectors._weight_check import check_weights, flat_weights, is_state_dict


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


def load_weights_(
    policy: Any, source: Any, *, check: bool = True, owner: str = "update_policy_weights_"
) -> None:
    """Copy ``source`` (module, TensorDict of weights or state_dict) into ``policy``, in place.

    With ``check`` (the default) the whole of ``source`` is validated first (same keys,
    exact shapes, same dtype kind, finite values: see ``_weight_check``), so either every
    weight is written or none is.

    Raises:
        TypeError: if ``policy`` is not an ``nn.Module`` or ``source`` has an unknown type.
        ValueError: ``source`` does not match ``policy``'s weights (nothing is written).
    """
    if not isinstance(policy, nn.Module):
        raise TypeError(
            f"cannot load weights into a {type(policy).__name__}: only torch.nn.Module policies "
            "have weights to update."
        )
    if check:
        given = flat_weights(source)
        if is_state_dict(source):
            expected = policy.state_dict(keep_vars=True)
        else:
            expected = flat_weights(policy)
        check_weights(expected, given, owner)
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


def fast_policy_call(policy: Any) -> Callable[[TensorDictBase], TensorDictBase] | None:
    """A lean call for a plain ``TensorDictModule``: read ``in_keys``, call the module, write ``out_keys``.

    ``TensorDictModule.forward`` pays for dispatch decorators and output conversion on
    every call (tensordict 0.14 even looks pandas up on the import path per output).
    For the exact class with list ``in_keys``, in-place writing, no ``method`` and no
    hooks, this does the same reads and writes directly. Anything else returns
    ``None`` and the collector calls the policy itself. If the module returns anything
    but tensors, the call falls back to the policy for good.
    """
    if type(policy) is not TensorDictModule:
        return None
    if (
        policy.inplace is not True
        or getattr(policy, "method", None) is not None
        or getattr(policy, "method_kwargs", None)
        or getattr(policy, "_kwargs", None) is not None
        or getattr(policy, "_get_kwargs", None)
        or policy._forward_hooks
        or policy._forward_pre_hooks
        or "_" in policy.out_keys
    ):
        return None
    module, in_keys, out_keys = policy.module, list(policy.in_keys), list(policy.out_keys)
    usable = [True]

    def call(tensordict: TensorDictBase) -> TensorDictBase:
        if not usable[0]:
            return policy(tensordict)
        out = module(*[tensordict.get(key) for key in in_keys])
        if type(out) is torch.Tensor:
            out = (out,)
        elif not (isinstance(out, tuple) and all(isinstance(t, torch.Tensor) for t in out)):
            usable[0] = False
            return policy(tensordict)
        if len(out) != len(out_keys):
            raise RuntimeError(
                f"the policy's module returned {len(out)} tensors for out_keys {out_keys}; "
                "make them match."
            )
        for key, value in zip(out_keys, out, strict=True):
            tensordict.set(key, value)
        return tensordict

    return call
