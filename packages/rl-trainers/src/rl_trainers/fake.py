"""Fake-data helpers: a collector stand-in producing random batches that conform to a spec."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase

__all__ = ["FakeCollector", "FieldSpec"]


@dataclass(frozen=True)
class FieldSpec:
    """Shape, dtype and range of one entry of a fake batch.

    Floats are standard normal (scaled into ``[low, high)`` when both are given);
    integers are uniform in ``[low, high)``; bools are ``True`` with probability ``p``.

    Args:
        shape: per-element shape (the batch dims are prepended).
        dtype: a torch dtype.
        low: lower bound (ints: inclusive; floats: uniform when ``high`` is set too).
        high: upper bound (exclusive).
        p: probability of ``True`` for bool entries.
    """

    shape: tuple[int, ...] = ()
    dtype: torch.dtype = torch.float32
    low: float | None = None
    high: float | None = None
    p: float = 0.05

    def sample(
        self, batch: tuple[int, ...], generator: torch.Generator, device: torch.device
    ) -> torch.Tensor:
        size = (*batch, *self.shape)
        if self.dtype == torch.bool:
            return torch.rand(size, generator=generator, device=device) < self.p
        if self.dtype.is_floating_point:
            if self.low is not None and self.high is not None:
                u = torch.rand(size, generator=generator, device=device)
                return (self.low + (self.high - self.low) * u).to(self.dtype)
            return torch.randn(size, generator=generator, device=device).to(self.dtype)
        low = 0 if self.low is None else int(self.low)
        high = 2 if self.high is None else int(self.high)
        return torch.randint(low, high, size, generator=generator, device=device, dtype=self.dtype)


def _field(key: NestedKey, value: Any) -> FieldSpec | Any:
    if isinstance(value, FieldSpec):
        return value
    if isinstance(value, Mapping):
        return FieldSpec(**{**value, "shape": tuple(value.get("shape", ()))})
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], torch.dtype):
        return FieldSpec(shape=tuple(value[0]), dtype=value[1])
    if callable(getattr(value, "rand", None)):
        return value  # a spec-like object (rl_envs / TorchRL specs): its own rand(shape)
    raise TypeError(
        f"FakeCollector spec entry {key!r}: expected a FieldSpec, a (shape, dtype) tuple, "
        f"a dict of FieldSpec arguments or a spec with rand(shape), got {value!r}"
    )


class FakeCollector:
    """A deterministic stand-in for a collector: yields random TensorDict batches from a spec.

    Each batch has ``batch_size=[*env_batch, frames_per_batch // n_envs]`` (or
    ``[frames_per_batch]`` when ``env_batch`` is empty), carries the requested
    entries plus the contract's ``("collector", "traj_ids")`` and, unless given,
    ``("next", "done" / "terminated" / "truncated")`` flags and a
    ``("next", "reward")``. Draws come from a private ``torch.Generator``, so a
    seeded fake collector produces the same stream whatever else runs, and
    ``state_dict`` / ``load_state_dict`` resume that stream exactly.

    It also honours the collector interface the ``Trainer`` calls:
    ``set_seed``, ``update_policy_weights_`` (counted in ``weight_updates``),
    ``shutdown``, ``init_random_frames``.

    Args:
        spec: ``{key: FieldSpec | (shape, dtype) | dict | spec-with-rand}``; nested keys as tuples.
        frames_per_batch: elements per batch.
        total_frames: frames before iteration stops; ``-1`` never stops.
        env_batch: leading env dims, e.g. ``(4,)`` for 4 envs (``frames_per_batch`` must divide).
        seed: seed of the private generator.
        device: where the batches live.
        init_random_frames: reported to the Trainer (the fake data is random throughout).

    Examples:
        >>> collector = FakeCollector({"observation": ((4,), torch.float32)}, frames_per_batch=8, seed=0)
        >>> batch = next(iter(collector))
        >>> batch["observation"].shape, batch["next", "reward"].shape
        (torch.Size([8, 4]), torch.Size([8, 1]))
    """

    def __init__(
        self,
        spec: Mapping[NestedKey, Any],
        frames_per_batch: int,
        total_frames: int = -1,
        *,
        env_batch: tuple[int, ...] = (),
        seed: int = 0,
        device: torch.device | str = "cpu",
        init_random_frames: int = 0,
    ) -> None:
        if frames_per_batch < 1:
            raise ValueError(f"frames_per_batch must be >= 1, got {frames_per_batch}")
        n_envs = 1
        for d in env_batch:
            n_envs *= d
        if frames_per_batch % n_envs:
            raise ValueError(
                f"frames_per_batch={frames_per_batch} is not a multiple of the {n_envs} envs of "
                f"env_batch={env_batch}"
            )
        self.spec = {key: _field(key, value) for key, value in spec.items()}
        defaults = {
            ("next", "reward"): FieldSpec((1,), torch.float32),
            ("next", "terminated"): FieldSpec((1,), torch.bool),
            ("next", "truncated"): FieldSpec((1,), torch.bool, p=0.0),
        }
        for key, field in defaults.items():
            self.spec.setdefault(key, field)
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.env_batch = tuple(env_batch)
        self.device = torch.device(device)
        self.init_random_frames = init_random_frames
        self.batch_size = (
            torch.Size([*self.env_batch, frames_per_batch // n_envs])
            if self.env_batch
            else torch.Size([frames_per_batch])
        )
        self._n_envs = n_envs
        self._generator = torch.Generator(device=self.device)
        self.set_seed(seed)
        self._frames = 0
        self._iter = 0
        self._traj_offset = 0
        self.weight_updates = 0
        self.is_shutdown = False

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Reseed the private generator; returns the seed (TorchRL's collector signature)."""
        self._generator.manual_seed(seed)
        return seed

    def next_batch(self) -> TensorDictBase:
        """One batch, advancing the stream."""
        shape = tuple(self.batch_size)
        data = {}
        for key, field in self.spec.items():
            if isinstance(field, FieldSpec):
                data[key] = field.sample(shape, self._generator, self.device)
            else:
                data[key] = field.rand(torch.Size(shape)).to(self.device)
        td = TensorDict(data, batch_size=self.batch_size, device=self.device)
        if ("next", "done") not in td.keys(True):
            td.set(("next", "done"), td.get(("next", "terminated")) | td.get(("next", "truncated")))
        traj = (
            torch.arange(self._n_envs, device=self.device).view(*self.env_batch, 1)
            if self.env_batch
            else None
        )
        if traj is None:
            traj_ids = torch.full(shape, self._traj_offset, device=self.device)
        else:
            traj_ids = (traj + self._traj_offset).expand(shape)
        td.set(("collector", "traj_ids"), traj_ids)
        self._traj_offset += self._n_envs
        self._frames += self.frames_per_batch
        self._iter += 1
        return td

    def __iter__(self) -> Iterator[TensorDictBase]:
        while self.total_frames < 0 or self._frames < self.total_frames:
            yield self.next_batch()

    def __len__(self) -> int:
        if self.total_frames < 0:
            raise TypeError("an endless FakeCollector (total_frames=-1) has no length")
        return -(-self.total_frames // self.frames_per_batch)

    def update_policy_weights_(self, *args: Any, **kwargs: Any) -> None:
        self.weight_updates += 1

    def shutdown(self) -> None:
        self.is_shutdown = True

    def state_dict(self) -> dict[str, Any]:
        return {
            "generator": self._generator.get_state(),
            "frames": self._frames,
            "iter": self._iter,
            "traj_offset": self._traj_offset,
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self._generator.set_state(state_dict["generator"])
        self._frames = state_dict["frames"]
        self._iter = state_dict["iter"]
        self._traj_offset = state_dict["traj_offset"]

    def __repr__(self) -> str:
        return (
            f"FakeCollector(keys={list(self.spec)}, frames_per_batch={self.frames_per_batch}, "
            f"batch_size={list(self.batch_size)}, total_frames={self.total_frames})"
        )
