"""``DeviceCastTransform``: moves outputs to a device and inputs back to the env's device."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import EnvSpecs, Transform


class DeviceCastTransform(Transform):
    """Casts entries to ``device`` on the way out and to ``orig_device`` on the way in.

    Without keys, every output entry (and the specs) move to ``device`` and every
    input goes back to ``orig_device`` (default: the parent env's device); with
    ``in_keys`` / ``in_keys_inv`` only those entries move.

    Args:
        device: the device of the outputs (and of the transformed specs).
        orig_device: the device of the inner env (default: the parent env's, else CPU).
        in_keys, out_keys: outputs to move (default: all).
        in_keys_inv, out_keys_inv: inputs to move back (default: all, when
            ``in_keys`` is not given either).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DeviceCastTransform("meta", "cpu", in_keys=["obs"])
        >>> t(TensorDict(obs=torch.zeros(2)))["obs"].device
        device(type='meta')
    """

    invertible = True

    def __init__(
        self,
        device: Any,
        orig_device: Any = None,
        *,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
    ) -> None:
        self._all = in_keys is None and in_keys_inv is None
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.device = torch.device(device)
        self.orig_device = torch.device(orig_device) if orig_device is not None else None

    def _inner_device(self) -> torch.device:
        if self.orig_device is None:
            parent = self.parent
            self.orig_device = parent.device if parent is not None else torch.device("cpu")
        return self.orig_device

    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.device)

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self._inner_device())

    def transform_env_device(self, device: torch.device | None) -> torch.device | None:
        """Casting everything moves the env to ``device``; casting some keys leaves its
        outputs on two devices (``None``, as TorchRL)."""
        if self.orig_device is None and device is not None:
            self.orig_device = device
        return self.device if self._all else None

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self._all:
            return next_tensordict.to(self.device)
        return super()._call(next_tensordict.clear_device_())

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        if self._all:
            return tensordict_reset.to(self.device)
        return super()._reset(tensordict, tensordict_reset.clear_device_())

    def _has_inverse(self) -> bool:
        return True

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._all:
            return tensordict.to(self._inner_device())
        return super()._inv_call(tensordict)

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        if not self._all:
            return super().transform_specs(specs)
        if self.orig_device is None:
            self.orig_device = specs.observation.device or torch.device("cpu")
        for name in ("observation", "reward", "done", "action", "state"):
            setattr(specs, name, getattr(specs, name).to(self.device))
        return specs

    def transform_leaf_spec(self, spec: Any) -> Any:
        return spec.to(self.device)

    def transform_leaf_spec_inv(self, spec: Any) -> Any:
        return spec.to(self.device)
