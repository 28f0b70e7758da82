"""Validation of new policy weights before any of them is written (all or nothing).

``update_policy_weights_`` copies weights into a live policy (or into the shared copy the
workers read). A partial, broadcast, cast-across-kinds or non-finite update would leave
the policy silently wrong, and a failure half-way through would leave it half-updated. So
the whole update is checked first, against the weights it replaces:

* the same keys: none missing, none extra;
* the same shapes, exactly (a ``[1, 1]`` tensor does not broadcast into a ``[4, 3]`` weight);
* dtypes of the same kind: floating values for floating weights (a ``float64`` or
  ``bfloat16`` value is cast, as ``nn.Module.load_state_dict`` does), integers for integer
  buffers, booleans for boolean ones; never an integer for a float or the reverse;
* finite values (no NaN, no inf) in floating weights.

Only then is anything copied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn


def flat_weights(source: Any) -> dict[str, Any]:
    """``{"layer.weight": tensor, ...}`` from a module (its parameters and buffers, as
    ``TensorDict.from_module``), a TensorDict of weights (nested keys joined with ``"."``)
    or a state_dict (as given).

    Raises:
        TypeError: ``source`` is none of these.
    """
    if isinstance(source, nn.Module):
        source = TensorDict.from_module(source).data
    if isinstance(source, TensorDictBase):
        return {
            ".".join(key) if isinstance(key, tuple) else key: value
            for key, value in source.items(include_nested=True, leaves_only=True)
        }
    if isinstance(source, Mapping):
        return dict(source)
    raise TypeError(
        "policy weights must be an nn.Module, a TensorDict (TensorDict.from_module(policy)) "
        f"or a state_dict; got {type(source).__name__}."
    )


def _kind(dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "bool"
    if dtype.is_complex:
        return "complex"
    if dtype.is_floating_point:
        return "floating"
    return "integer"


def check_weights(
    expected: Mapping[str, torch.Tensor], given: Mapping[str, Any], owner: str
) -> None:
    """Raise unless ``given`` can replace ``expected`` entry for entry (see the module doc).

    Args:
        expected: the weights being replaced, by dotted name.
        given: the new weights, by dotted name (:func:`flat_weights`).
        owner: who refuses, for the message (e.g. ``"MultiSyncCollector.update_policy_weights_"``).

    Raises:
        ValueError: missing or extra keys, a shape or dtype kind that differs, a non-tensor
            value, or NaN / inf in floating values; the message lists every problem.
    """
    problems = []
    missing = [key for key in expected if key not in given]
    extra = sorted(key for key in given if key not in expected)
    if missing:
        problems.append(f"missing keys {missing}")
    if extra:
        problems.append(f"unexpected keys {extra}")
    floating = []
    for key, old in expected.items():
        new = given.get(key)
        if new is None:
            continue
        if not isinstance(new, torch.Tensor):
            problems.append(f"{key!r} is a {type(new).__name__}, expected a tensor")
        elif new.shape != old.shape:
            problems.append(
                f"{key!r} has shape {tuple(new.shape)}, expected {tuple(old.shape)} "
                "(shapes must match exactly; nothing is broadcast)"
            )
        elif _kind(new.dtype) != _kind(old.dtype):
            problems.append(
                f"{key!r} has dtype {new.dtype}, expected {old.dtype} (a {_kind(old.dtype)} "
                f"weight takes {_kind(old.dtype)} values only)"
            )
        elif new.is_floating_point() or new.is_complex():
            floating.append((key, new))
    if not problems and floating:
        # A NaN or inf makes a tensor's sum non-finite; a sum is ~30x cheaper than isfinite()
        # on CPU. A finite tensor whose sum overflows is then checked element-wise.
        sums = torch.stack(
            [
                t.detach().sum().to("cpu", torch.complex128 if t.is_complex() else torch.float64)
                for _, t in floating
            ]
        )
        if not bool(torch.isfinite(sums).all()):
            bad = [key for key, t in floating if not bool(torch.isfinite(t.detach()).all())]
            if bad:
                problems.append(f"NaN or inf values in {bad} (did training diverge?)")
    if problems:
        raise ValueError(
            f"{owner}: refused the new weights, nothing was changed: {'; '.join(problems)}. "
            "Pass the full state_dict (or TensorDict.from_module(policy)) of a module with the "
            "same architecture, with finite values."
        )


def is_state_dict(source: Any) -> bool:
    """A plain mapping of weights (a ``state_dict``), which holds no non-persistent buffer."""
    return isinstance(source, Mapping) and not isinstance(source, TensorDictBase)
