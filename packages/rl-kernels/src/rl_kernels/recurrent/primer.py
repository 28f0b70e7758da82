"""What an env must carry for a recurrent module: ``{state key: spec-like}``, zero at reset."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import torch
from tensordict.utils import NestedKey


@dataclass(frozen=True)
class StateSpec:
    """Shape (without batch dims), dtype and device of one recurrent state: a minimal spec-like object.

    Examples:
        >>> StateSpec(torch.Size([1, 8])).zero((2,)).shape
        torch.Size([2, 1, 8])
    """

    shape: torch.Size
    dtype: torch.dtype = torch.float32
    device: torch.device | None = None

    def zero(self, batch: tuple[int, ...] | torch.Size = ()) -> torch.Tensor:
        """Zeros of shape ``[*batch, *shape]``."""
        return torch.zeros(*batch, *self.shape, dtype=self.dtype, device=self.device)


@dataclass(frozen=True)
class RecurrentStatePrimer(Mapping):
    """A read-only ``{key: StateSpec}`` mapping plus ``default_value`` and ``reset_key``.

    A primer transform that takes ``{key: spec}`` accepts it as is (e.g.
    ``env.append_transform(module.make_tensordict_primer())`` with rl_envs);
    this package never imports an env library.

    Examples:
        >>> p = RecurrentStatePrimer({"recurrent_state": StateSpec(torch.Size([1, 4]))})
        >>> list(p), p.reset_key
        (['recurrent_state'], 'is_init')
    """

    specs: dict[NestedKey, StateSpec] = field(default_factory=dict)
    default_value: float = 0.0
    reset_key: NestedKey = "is_init"
    expand_specs: bool = True

    def __getitem__(self, key: NestedKey) -> StateSpec:
        return self.specs[key]

    def __iter__(self) -> Iterator[NestedKey]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)
