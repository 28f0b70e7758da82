"""``TensorDictPrimer``: adds entries (e.g. recurrent states) that an env does not produce."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.specs import TensorSpec, Unbounded
from rl_envs.transforms._utils import NestedKey, masked_fill_reset
from rl_envs.transforms.transform import EnvSpecs, Transform

DefaultValue = float | Callable[[], torch.Tensor]


def _as_tensor_spec(key: NestedKey, spec: Any) -> Any:
    """A spec-like object (``shape``, ``dtype``, ``device``; e.g. rl_modules' states) as ``Unbounded``."""
    if isinstance(spec, TensorSpec) or hasattr(spec, "lock_"):
        return spec
    if not (hasattr(spec, "shape") and hasattr(spec, "dtype")):
        raise TypeError(
            f"TensorDictPrimer: the primer for {key!r} is a {type(spec).__name__}; expected a spec "
            "(e.g. Unbounded(shape=...)) or a spec-like object with shape and dtype."
        )
    return Unbounded(shape=spec.shape, dtype=spec.dtype, device=getattr(spec, "device", None))


def _given(default_value: Any) -> bool:
    """Whether a default value other than "nothing" / 0 was passed (TorchRL's truthiness)."""
    if default_value is None or callable(default_value):
        return default_value is not None
    if isinstance(default_value, Mapping):
        return bool(default_value)
    return float(default_value) != 0.0


def _leaf_entries(entries: dict[NestedKey, Any]) -> dict[NestedKey, Any]:
    """``{key: Composite}`` entries become one entry per leaf, ``(key, *leaf_key)``."""
    out: dict[NestedKey, Any] = {}
    for key, spec in entries.items():
        if hasattr(spec, "keys") and hasattr(spec, "lock_"):  # a Composite
            prefix = (key,) if isinstance(key, str) else tuple(key)
            for leaf in spec.keys(include_nested=True, leaves_only=True):
                leaf_t = (leaf,) if isinstance(leaf, str) else tuple(leaf)
                out[(*prefix, *leaf_t)] = spec[leaf]
        else:
            out[key] = spec
    return out


def primer_from_mapping(description: Mapping[NestedKey, Any]) -> TensorDictPrimer:
    """A ``TensorDictPrimer`` from a ``{key: spec-like}`` mapping such as
    ``LSTMModule.make_tensordict_primer()`` returns (its ``default_value`` and
    ``reset_key`` attributes are used when present)."""
    return TensorDictPrimer(
        dict(description),
        default_value=getattr(description, "default_value", None),
        reset_key=getattr(description, "reset_key", None),
        expand_specs=getattr(description, "expand_specs", None),
    )


class TensorDictPrimer(Transform):
    """Writes primer entries at reset and carries them through steps.

    Each primer is a spec (without the env's batch dims, which are prepended).
    At reset the entry is filled with ``default_value`` (or a random draw with
    ``random=True``) for the reset entries; at each step, if the inner env and
    the policy did not write ``("next", key)``, the root value is carried over.
    The entries join both the observation spec and the state spec, so policies
    (e.g. an LSTM) can read them and write their next value.

    Args:
        primers: ``{key: spec}`` (a dict or a Composite); keyword arguments add more.
        random: draw initial values with ``spec.rand()`` instead of ``default_value``.
        default_value: a float, a callable returning a tensor, or a dict of
            either per key (default 0).
        reset_key: unused (partial resets read ``"_reset"``); TorchRL signature parity.
        expand_specs: unused: batch dims are always prepended when missing.
        **kwargs: more ``key=spec`` primers.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_envs.specs import Unbounded
        >>> t = TensorDictPrimer(hidden=Unbounded(shape=(3,)), default_value=1.0)
        >>> t(TensorDict())["hidden"]
        tensor([1., 1., 1.])
    """

    def __init__(
        self,
        primers: Mapping[NestedKey, Any] | Any | None = None,
        random: bool | None = None,
        default_value: DefaultValue | Mapping[NestedKey, DefaultValue] | None = None,
        reset_key: NestedKey | None = None,
        expand_specs: bool | None = None,
        **kwargs: Any,
    ) -> None:
        entries: dict[NestedKey, Any] = {}
        if primers is not None:
            keys = (
                primers.keys(include_nested=True, leaves_only=True)
                if hasattr(primers, "lock_")
                else primers.keys()
            )
            entries.update({k: primers[k] for k in keys})
        entries.update(kwargs)
        entries = _leaf_entries(entries)
        entries = {key: _as_tensor_spec(key, spec) for key, spec in entries.items()}
        if random and _given(default_value):
            raise ValueError(
                "TensorDictPrimer: setting random to True and providing a default_value are "
                "incompatible (a default of 0 is accepted, as TorchRL)."
            )
        keys_list = list(entries)
        super().__init__()
        self.out_keys = keys_list  # written, not read: there are no in_keys
        self.primers = entries
        self.random = bool(random)
        if isinstance(default_value, Mapping):
            missing = set(keys_list) - set(default_value)
            if missing:
                raise KeyError(
                    f"TensorDictPrimer: default_value lacks keys {sorted(missing, key=str)}."
                )
            self.default_value = dict(default_value)
        else:
            value = 0.0 if default_value is None else default_value
            self.default_value = dict.fromkeys(keys_list, value)
        self._batch: tuple[int, ...] = ()

    def _spec_for(self, key: NestedKey, batch: tuple[int, ...]) -> Any:
        spec = self.primers[key]
        if tuple(spec.shape[: len(batch)]) == batch and len(batch) > 0:
            return spec
        return spec.expand(*batch, *spec.shape)

    def _fresh(self, key: NestedKey, batch: tuple[int, ...], device: Any) -> torch.Tensor:
        spec = self._spec_for(key, batch)
        if self.random:
            return spec.rand()
        value = self.default_value[key]
        if callable(value):
            out = torch.as_tensor(value(), dtype=spec.dtype, device=spec.device)
            return out.expand(spec.shape).clone()
        return torch.full(spec.shape, value, dtype=spec.dtype, device=spec.device)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        batch = tuple(tensordict_reset.batch_size)
        for key in self.out_keys:
            fresh = self._fresh(key, batch, tensordict_reset.device)
            tensordict_reset.set(key, masked_fill_reset(tensordict, key, fresh))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for key in self.out_keys:
            if next_tensordict.get(key, None) is None:
                value = tensordict.get(key, None)
                if value is None:
                    value = self._fresh(key, tuple(next_tensordict.batch_size), None)
                next_tensordict.set(key, value)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Fills the primer entries that ``tensordict`` lacks (e.g. before a policy call)."""
        batch = tuple(tensordict.batch_size)
        for key in self.out_keys:
            if tensordict.get(key, None) is None:
                tensordict.set(key, self._fresh(key, batch, tensordict.device))
        return tensordict

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        batch = tuple(specs.observation.shape)
        for key in self.out_keys:
            spec = self._spec_for(key, batch)
            specs.observation[key] = spec.clone()
            specs.state[key] = spec.clone()
        return specs

    def extra_repr(self) -> str:
        return f"primers={list(self.primers)}, random={self.random}"
