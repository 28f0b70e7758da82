"""``DTypeCastTransform`` and ``DoubleToFloat``: cast entries between dtypes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, cast_spec
from rl_envs.transforms.transform import EnvSpecs, Transform


class DTypeCastTransform(Transform):
    """Casts ``dtype_in`` entries to ``dtype_out`` on the way out, and back on the way in.

    With explicit keys only those entries are cast. Without keys, inside a
    ``TransformedEnv`` the keys are read from the specs (every ``dtype_in``
    observation / reward becomes an in_key, every ``dtype_in`` action / state an
    in_key_inv); on a bare TensorDict every ``dtype_in`` leaf is cast (and ``inv`` casts
    every ``dtype_out`` leaf back).

    Args:
        dtype_in: the env's dtype.
        dtype_out: the dtype seen outside.
        in_keys, out_keys: outputs to cast (``dtype_in -> dtype_out``).
        in_keys_inv, out_keys_inv: inputs to cast back (``dtype_out -> dtype_in``).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DTypeCastTransform(torch.float64, torch.float32, in_keys=["obs"])
        >>> t(TensorDict(obs=torch.zeros(2, dtype=torch.float64)))["obs"].dtype
        torch.float32
    """

    invertible = True

    def __init__(
        self,
        dtype_in: torch.dtype,
        dtype_out: torch.dtype,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
    ) -> None:
        auto = in_keys is None and in_keys_inv is None
        if auto and (out_keys is not None or out_keys_inv is not None):
            raise ValueError(
                f"{type(self).__name__}: out_keys need in_keys; without keys the entries are "
                "found by dtype and cast in place."
            )
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self._auto = auto
        self.dtype_in = dtype_in
        self.dtype_out = dtype_out
        self._keys_from_specs = False

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.dtype_out)

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.dtype_in)

    def _scan(self, tensordict: TensorDictBase, dtype: torch.dtype) -> list[NestedKey]:
        return [
            key
            for key, value in tensordict.items(include_nested=True, leaves_only=True)
            if isinstance(value, torch.Tensor) and value.dtype == dtype
        ]

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self._auto and not self._keys_from_specs:
            for key in self._scan(next_tensordict, self.dtype_in):
                next_tensordict.set(key, next_tensordict.get(key).to(self.dtype_out))
            return next_tensordict
        return super()._call(next_tensordict)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._auto and not self._keys_from_specs:  # outside an env: every dtype_out entry
            for key in self._scan(tensordict, self.dtype_out):
                tensordict.set(key, tensordict.get(key).to(self.dtype_in))
            return tensordict
        return super()._inv_call(tensordict)

    def _has_inverse(self) -> bool:
        return bool(self.in_keys_inv)

    def _supports_rollout_map(self) -> bool:
        return not self._has_inverse()

    def transform_leaf_spec(self, spec: Any) -> Any:
        return cast_spec(spec, self.dtype_out) if spec.dtype == self.dtype_in else spec

    def transform_leaf_spec_inv(self, spec: Any) -> Any:
        return cast_spec(spec, self.dtype_out) if spec.dtype == self.dtype_in else spec

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        if self._auto:
            self.in_keys = _keys_of_dtype(specs.observation, self.dtype_in) + _keys_of_dtype(
                specs.reward, self.dtype_in
            )
            self.out_keys = list(self.in_keys)
            self.in_keys_inv = _keys_of_dtype(specs.action, self.dtype_in) + _keys_of_dtype(
                specs.state, self.dtype_in
            )
            self.out_keys_inv = list(self.in_keys_inv)
            self._keys_from_specs = True
        return super().transform_specs(specs)

    def reset_parent(self) -> None:
        super().reset_parent()
        if self._auto:
            self.in_keys, self.out_keys, self.in_keys_inv, self.out_keys_inv = [], [], [], []
            self._keys_from_specs = False

    def extra_repr(self) -> str:
        return f"dtype_in={self.dtype_in}, dtype_out={self.dtype_out}, {super().extra_repr()}"


class DoubleToFloat(DTypeCastTransform):
    """Casts float64 entries to float32 (and float32 inputs back to float64).

    Args:
        in_keys, out_keys, in_keys_inv, out_keys_inv: as in :class:`DTypeCastTransform`;
            without keys, every float64 entry found in the specs is cast.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> DoubleToFloat()(TensorDict(obs=torch.zeros(2, dtype=torch.float64)))["obs"].dtype
        torch.float32
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(torch.float64, torch.float32, in_keys, out_keys, in_keys_inv, out_keys_inv)


def _keys_of_dtype(composite: Any, dtype: torch.dtype) -> list[NestedKey]:
    return [
        key
        for key in composite.keys(include_nested=True, leaves_only=True)
        if composite[key].dtype == dtype
    ]
