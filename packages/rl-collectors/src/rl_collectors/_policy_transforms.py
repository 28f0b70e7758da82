"""The env transforms a recurrent policy needs (``auto_register_policy_transforms``, TorchRL).

A recurrent module (anything exposing ``make_tensordict_primer()``, e.g. an LSTM or
GRU module) reads ``is_init`` and its hidden states from the env's output: the env
needs an ``InitTracker`` and a ``TensorDictPrimer``. This package never imports the env
library, so the two transform classes (and the spec class a primer description is built
with) are read from the modules the env's classes were defined in, which are already
imported: the env exists.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from torch import nn

_TRANSFORM_NAMES = ("InitTracker", "TensorDictPrimer", "Unbounded")


def _primer_modules(policy: Any) -> list[nn.Module]:
    if not isinstance(policy, nn.Module):
        return []
    return [m for m in policy.modules() if callable(getattr(m, "make_tensordict_primer", None))]


def _env_library(env: Any) -> dict[str, type] | None:
    """``InitTracker``, ``TensorDictPrimer`` and ``Unbounded`` from the env's own library."""
    for cls in type(env).__mro__:
        parts = cls.__module__.split(".")
        for i in range(len(parts), 0, -1):
            module = sys.modules.get(".".join(parts[:i]))
            found = {name: getattr(module, name, None) for name in _TRANSFORM_NAMES}
            if all(isinstance(v, type) for v in found.values()):
                return found  # type: ignore[return-value]
    return None


def _spec_keys(env: Any) -> set[Any]:
    keys: set[Any] = set()
    for attr in ("full_observation_spec", "full_state_spec"):
        spec = getattr(env, attr, None)
        if spec is not None:
            keys.update(spec.keys(True, True))
    return keys


def _has_leaf(keys: set[Any], name: str) -> bool:
    return any(k == name or (isinstance(k, tuple) and k[-1] == name) for k in keys)


def _primer_keys(primer: Any) -> set[Any]:
    # a TensorDictPrimer holds a Composite under .primers; a primer description (e.g.
    # rl_kernels' RecurrentStatePrimer) is itself a {state key: spec} mapping
    entries = getattr(primer, "primers", primer)
    try:
        return set(entries.keys(True, True))  # a Composite
    except TypeError:
        return set(entries.keys())  # a mapping


def _buildable_primers(modules: list[nn.Module]) -> list[Any]:
    """Each module's primer; a module that cannot build one (e.g. a consistent dropout without
    ``input_shape``) is skipped with one ``UserWarning`` naming it, as TorchRL's collector does,
    so it does not cost the other modules their primers."""
    primers: list[Any] = []
    failures: list[str] = []
    for module in modules:
        try:
            primers.append(module.make_tensordict_primer())
        except Exception as err:  # any module's own error: reported, not fatal
            failures.append(f"{type(module).__name__}: {err}")
    if failures:
        warnings.warn(
            "auto_register_policy_transforms: no primer from "
            + "; ".join(sorted(set(failures)))
            + ". The env gets the other modules' transforms; configure those modules or append "
            "their primers to the env yourself.",
            UserWarning,
            stacklevel=5,
        )
    return primers


def missing_policy_transforms(env: Any, policy: Any, init_key: str = "is_init") -> list[Any]:
    """The transforms ``policy``'s recurrent modules need and ``env``'s specs lack (in order:
    an ``InitTracker`` for ``init_key``, then one primer per module whose states are missing).

    Detection reads the env's specs, so transforms living inside a batched env's children
    count, and a second call after appending them returns ``[]``.

    Raises:
        TypeError: transforms are needed but the env's library offers no ``InitTracker`` /
            ``TensorDictPrimer`` / ``Unbounded`` (append them to the env yourself).

    Example:
        >>> import torch
        >>> from rl_envs import GymEnv  # doctest: +SKIP
        >>> from rl_modules import GRUModule  # doctest: +SKIP
        >>> gru = GRUModule(input_size=4, hidden_size=8, in_keys=["observation", "h", "is_init"],
        ...                 out_keys=["y", ("next", "h")])  # doctest: +SKIP
        >>> [type(t).__name__ for t in missing_policy_transforms(GymEnv("CartPole-v1"), gru)]  # doctest: +SKIP
        ['InitTracker', 'TensorDictPrimer']
    """
    modules = _primer_modules(policy)
    if not modules:
        return []
    keys = _spec_keys(env)
    primers = _buildable_primers(modules)
    needed_init = not _has_leaf(keys, init_key)
    needed_primers = [p for p in primers if not _primer_keys(p) <= keys]
    if not needed_init and not needed_primers:
        return []
    library = _env_library(env)
    if library is None:
        raise TypeError(
            f"auto_register_policy_transforms: the policy's recurrent modules need "
            f"{init_key!r} and their states in the env, but {type(env).__name__}'s library "
            "offers no InitTracker / TensorDictPrimer / Unbounded. Append those transforms to "
            "the env yourself and pass auto_register_policy_transforms=False."
        )
    out: list[Any] = [library["InitTracker"](init_key=init_key)] if needed_init else []
    for primer in needed_primers:
        build = getattr(primer, "build", None)  # a description: built with the env's classes
        out.append(
            build(library["TensorDictPrimer"], library["Unbounded"]) if callable(build) else primer
        )
    return out


def register_policy_transforms(env: Any, policy: Any, flag: bool | None, who: str) -> Any:
    """``env`` with the transforms ``policy`` needs appended (``flag=True``), as it is
    (``False``), or as it is with a ``FutureWarning`` naming what is missing (``None``,
    TorchRL 0.14's default, which flips to ``True`` in 0.15)."""
    if flag is False:
        return env
    missing = missing_policy_transforms(env, policy)
    if not missing:
        return env
    if flag is None:
        names = ", ".join(type(t).__name__ for t in missing)
        warnings.warn(
            f"The env passed to {who} is missing transforms required by the policy ({names}). "
            "From TorchRL v0.15 the collector appends them automatically: pass "
            "auto_register_policy_transforms=True to do so now (and silence this warning), or "
            "auto_register_policy_transforms=False to opt out.",
            FutureWarning,
            stacklevel=4,
        )
        return env
    for transform in missing:
        env = env.append_transform(transform)
    return env
