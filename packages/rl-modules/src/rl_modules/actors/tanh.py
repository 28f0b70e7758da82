"""``TanhModule``: squash entries into a box with ``tanh``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from rl_modules._keys import check_in_keys
from rl_modules._spec import is_composite, spec_bounds


def _bound(
    value: Any, from_spec: torch.Tensor | None, default: float, name: str, who: str
) -> torch.Tensor:
    if value is None:
        return from_spec if from_spec is not None else torch.tensor(default)
    given = value
    value = torch.as_tensor(value, dtype=torch.get_default_dtype())
    if from_spec is not None and bool((value != from_spec).any()):
        which = "minimum" if name == "low" else "maximum"
        raise ValueError(
            f"The {which} value ({given}) provided to {who} does not match the action spec one "
            f"({from_spec.tolist()}); give {name}= or spec=, not both."
        )
    return value


class TanhModule(TensorDictModuleBase):
    """Writes ``low + (high - low) * (tanh(x) + 1) / 2`` for each in_key.

    The bounds come from ``low`` / ``high``, or from the spec's
    ``space.low`` / ``space.high`` (``spec`` is one spec for every key or a
    Composite-like object keyed by out_keys), else ``[-1, 1]`` (plain tanh).

    Args:
        in_keys: the keys to squash.
        out_keys: where to write (default: in place, the in_keys).
        spec: optional spec-like object with ``space.low`` / ``space.high``.
        low: lower bound (must match the spec's when both are given).
        high: upper bound.
        clamp: keep ``tanh(x)`` one float resolution away from ``-1`` and ``1``
            (keeps ``atanh`` of the output finite).

    Raises:
        ValueError: for different numbers of in_keys and out_keys, ``high < low``,
            or bounds that contradict the spec.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> m = TanhModule(["action"], low=-2.0, high=2.0)
        >>> m(TensorDict(action=torch.tensor([[100.0, 0.0]]), batch_size=[1]))["action"]
        tensor([[2., 0.]])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey] | None = None,
        *,
        spec: Any = None,
        low: Any = None,
        high: Any = None,
        clamp: bool = False,
    ) -> None:
        super().__init__()
        who = type(self).__name__
        in_keys = [in_keys] if isinstance(in_keys, (str, tuple)) else list(in_keys)
        out_keys = in_keys if out_keys is None else list(out_keys)
        if len(in_keys) != len(out_keys):
            raise ValueError(
                f"{who}: in_keys and out_keys should have the same length, got in_keys={in_keys} "
                f"and out_keys={out_keys}."
            )
        self.in_keys, self.out_keys, self.clamp, self.spec = in_keys, out_keys, clamp, spec
        self._bounds: list[tuple[str, str]] = []
        # buffers named "<out_key>_low" / "<out_key>_high" (nested keys joined by "_"), as TorchRL
        self.non_trivial: dict[NestedKey, bool] = {}
        for key in out_keys:
            leaf = spec
            if is_composite(spec):
                leaf = spec[key] if key in spec.keys(True, True) else None
            spec_low = spec_high = None
            if leaf is not None:
                spec_low, spec_high = spec_bounds(leaf, who)
            lo = _bound(low, spec_low, -1.0, "low", who)
            hi = _bound(high, spec_high, 1.0, "high", who)
            if bool((hi < lo).any()):
                raise ValueError(f"{who}: Got high < low for {key!r}.")
            name = key if isinstance(key, str) else "_".join(key)
            self.register_buffer(f"{name}_low", lo)
            self.register_buffer(f"{name}_high", hi)
            self.non_trivial[key] = not (bool((lo == -1).all()) and bool((hi == 1).all()))
            self._bounds.append(
                (f"{name}_low", f"{name}_high") if self.non_trivial[key] else ("", "")
            )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        check_in_keys(tensordict, self.in_keys, type(self).__name__)
        for in_key, out_key, (low_name, high_name) in zip(
            self.in_keys, self.out_keys, self._bounds, strict=True
        ):
            value = tensordict.get(in_key).tanh()
            if self.clamp:
                eps = torch.finfo(value.dtype).resolution
                value = value.clamp(-1 + eps, 1 - eps)
            if low_name:
                low, high = getattr(self, low_name), getattr(self, high_name)
                value = low + (high - low) * (value + 1) / 2
            tensordict.set(out_key, value)
        return tensordict
