"""A duck-typed description of the recurrent states an env must carry (no rl_envs import)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from tensordict.utils import NestedKey


@dataclass(frozen=True)
class StateSpec:
    """An unbounded float spec-like object (``docs/contract.md`` section 6) for one state.

    Examples:
        >>> s = StateSpec(torch.Size([1, 8]))
        >>> s.zero((4,)).shape, s.expand(4, 1, 8).shape
        (torch.Size([4, 1, 8]), torch.Size([4, 1, 8]))
    """

    shape: torch.Size
    dtype: torch.dtype = torch.float32
    device: torch.device | None = None

    def zero(self, shape: tuple[int, ...] | torch.Size = ()) -> torch.Tensor:
        return torch.zeros(*shape, *self.shape, dtype=self.dtype, device=self.device)

    def rand(self, shape: tuple[int, ...] | torch.Size = ()) -> torch.Tensor:
        return torch.randn(*shape, *self.shape, dtype=self.dtype, device=self.device)

    def is_in(self, value: torch.Tensor) -> bool:
        return tuple(value.shape[value.ndim - len(self.shape) :]) == tuple(self.shape) and (
            value.dtype == self.dtype
        )

    def project(self, value: torch.Tensor) -> torch.Tensor:
        return value.to(self.dtype)

    def encode(self, value: Any) -> torch.Tensor:
        return torch.as_tensor(value, dtype=self.dtype, device=self.device)

    def expand(self, *shape: int) -> StateSpec:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
            shape = tuple(shape[0])
        return StateSpec(torch.Size(shape), self.dtype, self.device)

    def clone(self) -> StateSpec:
        return self

    def to(self, device: torch.device | str) -> StateSpec:
        return StateSpec(self.shape, self.dtype, torch.device(device))


@dataclass
class RecurrentStatePrimer(Mapping):
    """``{state key: StateSpec}`` plus how to initialise them: what an env primer needs.

    ``default_value`` is a float or a callable returning a fresh value (called at
    each reset, e.g. a new dropout mask). It is a read-only mapping, so a primer
    transform that accepts ``{key: spec}`` can take it as is; :meth:`build` makes the real transform
    from classes the caller passes in (this package never imports rl_envs).

    Examples:
        >>> p = RecurrentStatePrimer({"recurrent_state_h": StateSpec(torch.Size([1, 8]))})
        >>> list(p), p.default_value
        (['recurrent_state_h'], 0.0)
    """

    primers: dict[NestedKey, StateSpec]
    default_value: float | Callable[[], torch.Tensor] = 0.0
    reset_key: NestedKey = "is_init"
    expand_specs: bool = True

    def __getitem__(self, key: NestedKey) -> StateSpec:
        return self.primers[key]

    def __iter__(self) -> Iterator[NestedKey]:
        return iter(self.primers)

    def __len__(self) -> int:
        return len(self.primers)

    def build(self, primer_class: type, spec_class: type) -> Any:
        """``primer_class({key: spec_class(shape=..., dtype=..., device=...)}, default_value=...)``.

        Example: ``lstm.make_tensordict_primer().build(TensorDictPrimer, Unbounded)``
        with both classes from ``rl_envs``.
        """
        specs = {
            k: spec_class(shape=s.shape, dtype=s.dtype, device=s.device)
            for k, s in self.primers.items()
        }
        return primer_class(specs, default_value=self.default_value, expand_specs=self.expand_specs)
