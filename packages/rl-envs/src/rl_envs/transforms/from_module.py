"""The env transforms a policy's stateful modules need, read from the policy itself.

A module that keeps state between steps (an LSTM or GRU module, a consistent
dropout mask) exposes ``make_tensordict_primer()``: a ``TensorDictPrimer`` or a
``{key: spec-like}`` description of the entries the env must carry. This package
never imports the module library; it walks any ``nn.Module`` and builds the
transforms (TorchRL's ``torchrl.modules.utils`` helpers, here because they
return env transforms).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from torch import nn

from rl_envs.transforms.compose import Compose
from rl_envs.transforms.init_tracker import InitTracker
from rl_envs.transforms.primer import TensorDictPrimer, primer_from_mapping
from rl_envs.transforms.transform import Transform


def _as_primer(description: object, owner: nn.Module) -> Transform:
    if isinstance(description, Transform):
        return description
    if isinstance(description, Mapping):
        return primer_from_mapping(description)
    raise TypeError(
        f"{type(owner).__name__}.make_tensordict_primer() returned a "
        f"{type(description).__name__}; expected a TensorDictPrimer or a {{key: spec}} mapping."
    )


def get_primers_from_module(
    module: nn.Module, warn: bool = True, strict: bool = True
) -> TensorDictPrimer | Compose | None:
    """The primers of every sub-module of ``module`` that has ``make_tensordict_primer()``.

    Args:
        module: any ``nn.Module`` (a policy, a ``TensorDictSequential``...).
        warn: warn when no sub-module has a primer.
        strict: let an error raised by a ``make_tensordict_primer()`` propagate;
            with ``False`` the failing sub-modules are named in one ``UserWarning``
            and the primers of the others are still returned.

    Returns:
        ``None`` without primers, the primer itself for one, a :class:`Compose`
        of them (in module order) for several.

    Examples:
        >>> import torch
        >>> from rl_envs.specs import Unbounded
        >>> class Memory(torch.nn.Module):
        ...     def make_tensordict_primer(self):
        ...         return {"memory": Unbounded(shape=(4,))}
        >>> primer = get_primers_from_module(torch.nn.Sequential(torch.nn.Linear(2, 2), Memory()))
        >>> type(primer).__name__, list(primer.primers)
        ('TensorDictPrimer', ['memory'])
    """
    primers: list[Transform] = []
    failures: list[str] = []
    for submodule in module.modules():
        make = getattr(submodule, "make_tensordict_primer", None)
        if not callable(make):
            continue
        try:
            primers.append(_as_primer(make(), submodule))
        except Exception as err:  # strict=False reports each failing module, whatever it raised
            if strict:
                raise
            failures.append(f"{type(submodule).__name__}: {err}")
    if failures:
        warnings.warn(
            "get_primers_from_module: no primer from "
            + "; ".join(sorted(set(failures)))
            + ". Configure those modules (e.g. input_shape=) or append their primers yourself; "
            "the primers of the other modules are returned.",
            UserWarning,
            stacklevel=2,
        )
    if not primers:
        if warn:
            warnings.warn(
                f"get_primers_from_module: no sub-module of {type(module).__name__} has "
                "make_tensordict_primer(); returning None.",
                UserWarning,
                stacklevel=2,
            )
        return None
    return primers[0] if len(primers) == 1 else Compose(*primers)


def get_env_transforms_from_module(
    module: nn.Module, init_key: str = "is_init"
) -> InitTracker | Compose:
    """``InitTracker(init_key)``, followed by ``module``'s primers when it has any.

    Pass the result to ``TransformedEnv`` (or ``env.append_transform``) so a
    recurrent policy finds its ``is_init`` flag and its hidden states.

    Args:
        module: the policy (any ``nn.Module``).
        init_key: the key the ``InitTracker`` writes; the recurrent modules' ``is_init`` key.

    Returns:
        A bare :class:`InitTracker` when ``module`` has no primers, else
        ``Compose(InitTracker, primer)``.

    Examples:
        >>> import torch
        >>> get_env_transforms_from_module(torch.nn.Linear(2, 2), init_key="first").init_key
        'first'
    """
    tracker = InitTracker(init_key=init_key)
    primer = get_primers_from_module(module, warn=False)
    return tracker if primer is None else Compose(tracker, primer)
