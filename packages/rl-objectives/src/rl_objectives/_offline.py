"""Helpers shared by the offline, imitation and ensemble losses (IQL, CQL, TD3+BC, CrossQ, REDQ).

Output assembly with TorchRL's ``scalar_output_mode``, shape checks whose errors name the key,
and the parameter view a loss uses when ``separate_losses`` keeps a shared trunk out of a
network's loss.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._keys import normalize_key
from rl_objectives._nets import dist_of, in_keys_of, with_params
from rl_objectives.common import loss_output

__all__ = [
    "action_leaf_spec",
    "assemble_output",
    "check_value_shape",
    "has_policy_dist",
    "policy_dist",
    "require_policy_dist",
    "resolve_scalar_mode",
    "target_entropy_from",
    "without_shared",
]

_SCALAR_MODES = (None, "exclude", "non_tensor")


def resolve_scalar_mode(owner: str, reduction: str, mode: str | None, scalars: str) -> str | None:
    """TorchRL's ``scalar_output_mode``: what happens to scalar diagnostics with ``reduction="none"``.

    With ``reduction="none"`` the output has the batch's shape, so scalars such as ``alpha``
    cannot sit in it as tensors: ``"exclude"`` drops them, ``"non_tensor"`` stores them as
    non-tensor data. Left to ``None`` with ``reduction="none"``, they are excluded with a
    warning, as in TorchRL.

    Raises:
        ValueError: an unknown mode.
    """
    if mode not in _SCALAR_MODES:
        raise ValueError(
            f"{owner}: scalar_output_mode must be one of {_SCALAR_MODES}, got {mode!r}."
        )
    if reduction == "none" and mode is None:
        warnings.warn(
            f"{owner} with reduction='none' returns a TensorDict shaped like the batch, which "
            f"cannot hold the scalar entries ({scalars}); they are left out. Pass "
            "scalar_output_mode='exclude' to silence this warning, or 'non_tensor' to keep them "
            "as non-tensor data.",
            UserWarning,
            stacklevel=3,
        )
        return "exclude"
    return mode


def assemble_output(
    losses: dict[str, torch.Tensor],
    scalars: dict[str, torch.Tensor],
    *,
    reduction: str,
    scalar_mode: str | None,
    batch_size: torch.Size,
) -> TensorDictBase:
    """The loss output: ``losses`` and ``scalars`` in one TensorDict.

    With ``reduction="none"`` the TensorDict has ``batch_size`` and the scalars follow
    ``scalar_mode`` (see :func:`resolve_scalar_mode`); otherwise every entry sits in a
    TensorDict with an empty batch size.
    """
    if reduction != "none":
        return loss_output({**losses, **scalars})
    out = TensorDict(losses, batch_size=batch_size)
    if scalar_mode == "non_tensor":
        for name, value in scalars.items():
            out.set_non_tensor(name, value)
    return out


def check_value_shape(
    value: torch.Tensor, batch_shape: torch.Size, key: NestedKey, owner: str, network: str
) -> torch.Tensor:
    """``value`` (a network output of shape ``[*batch, 1]``) squeezed to ``[*batch]``.

    Raises:
        ValueError: ``value`` does not have shape ``[*batch, 1]``.
    """
    expected = (*batch_shape, 1)
    if tuple(value.shape) != expected:
        raise ValueError(
            f"{owner}: the {network} wrote {key!r} with shape {tuple(value.shape)}, expected "
            f"{expected} (one value per sample, batch {tuple(batch_shape)}). Make the network's "
            "last layer output one feature."
        )
    return value.squeeze(-1)


def without_shared(params: TensorDictBase, others: Iterable[nn.Module]) -> TensorDictBase:
    """``params`` with every leaf that is also a parameter of ``others`` detached.

    Used with ``separate_losses=True``: a network's loss then trains only the parameters
    that are its own, not a trunk it shares with the actor.
    """
    shared = {id(p) for module in others for p in module.parameters()}
    return params.apply(lambda p: p.detach() if id(p) in shared else p, filter_empty=False)


def action_leaf_spec(action_spec: Any, action_key: NestedKey) -> tuple[Any, int]:
    """The action's own spec and the number of leading container dims.

    A Composite (anything with ``keys()``, e.g. an actor's ``spec``) is looked up at
    ``action_key``; its own ``shape`` (the container's batch dims) is counted so that
    ``-prod(shape[n:])`` is the action's dimensionality.
    """
    if callable(getattr(action_spec, "keys", None)):
        keys = [normalize_key(k) for k in action_spec.keys(True, True)]
        if action_key not in keys:
            return None, 0
        return action_spec[action_key], len(getattr(action_spec, "shape", ()))
    return action_spec, 0


def target_entropy_from(
    action_spec: Any, target_entropy: str | float, action_key: NestedKey = "action"
) -> float | None:
    """``-prod(action shape)`` for ``"auto"`` with a spec; the number itself; ``None`` to infer later."""
    if target_entropy != "auto":
        return float(target_entropy)
    spec, lead = action_leaf_spec(action_spec, action_key)
    shape = getattr(spec, "shape", None)
    if shape is None:
        return None
    return -float(torch.Size(tuple(shape)[lead:]).numel())


def has_policy_dist(actor: nn.Module) -> bool:
    """Whether :func:`policy_dist` can build ``actor``'s distribution."""
    if hasattr(actor, "get_dist"):
        return True
    mods = getattr(actor, "module", None)
    return isinstance(mods, nn.ModuleList) and len(mods) > 0 and hasattr(mods[-1], "get_dist")


def policy_dist(actor: nn.Module, td: TensorDictBase, params: Any = None) -> Any:
    """``actor``'s distribution on ``td``: ``get_dist``, or for a ``TensorDictSequential`` whose
    last module is probabilistic (e.g. ``ActorValueOperator.get_policy_operator()``), the
    other modules then the last one's ``get_dist``."""
    if hasattr(actor, "get_dist"):
        return dist_of(actor, td, params)
    with with_params(params, actor):
        mods = list(actor.module)
        out = td.select(*in_keys_of(actor), strict=False)
        for module in mods[:-1]:
            out = module(out)
        return mods[-1].get_dist(out)


def require_policy_dist(actor: nn.Module, owner: str) -> None:
    """Raise a ``TypeError`` naming the fix when ``actor`` gives no distribution."""
    if not has_policy_dist(actor):
        raise TypeError(
            f"{owner} needs an actor with get_dist(td) (e.g. ProbabilisticTensorDictSequential, "
            f"or a TensorDictSequential ending with one); got {type(actor).__name__}."
        )
