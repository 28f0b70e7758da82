"""Compact observations: each observation stored once, ``("next", obs)`` derived on read.

For item ``i`` written just before item ``i + 1`` in the same write, with
``("next", obs)[i]`` bitwise equal to ``obs[i + 1]``, the next observation is
not stored: it is read back from ``obs[i + 1]`` (the item is *linked*). Every
other item (the last step of an episode, terminated or truncated; the last
item of a write; the seam between two envs of a flattened batch) keeps its
next observation in a side pool, indexed by ``slot[i]``. The test is exact
(bitwise), so derived values are always the stored ones; linked items are
materialized into the pool before the item they read from is overwritten.
"""

from __future__ import annotations

import torch


def _bits(x: torch.Tensor) -> torch.Tensor:
    """A view whose ``==`` is bitwise equality (NaN == NaN, -0.0 != 0.0)."""
    if x.is_floating_point() or x.is_complex():
        return x.view(
            {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
        )
    return x


class CompactNext:
    """The side pool and the links of one 1-d storage (see the module docstring)."""

    def __init__(self, n_keys: int, capacity: int, device: torch.device) -> None:
        self.capacity = capacity
        self.device = device
        self.slot = torch.full((capacity,), -1, dtype=torch.int32, device=device)
        self.pools: list[torch.Tensor] = []
        self.free: list[int] = []
        self.n_keys = n_keys
        self.pool_size = 0

    def allocate_pools(self, shapes: list[torch.Size], dtypes: list[torch.dtype]) -> None:
        self.pools = [
            torch.empty((0, *s), dtype=d, device=self.device)
            for s, d in zip(shapes, dtypes, strict=False)
        ]

    def _take_slots(self, n: int) -> torch.Tensor:
        reuse = [self.free.pop() for _ in range(min(n, len(self.free)))]
        extra = n - len(reuse)
        if extra:
            new_size = max(self.pool_size + extra, 2 * self.pool_size, 16)
            new_size = min(new_size, max(self.capacity, self.pool_size + extra))
            for i, pool in enumerate(self.pools):
                grown = torch.empty(
                    (new_size, *pool.shape[1:]), dtype=pool.dtype, device=self.device
                )
                grown[: self.pool_size] = pool[: self.pool_size]
                self.pools[i] = grown
            reuse += list(range(self.pool_size, self.pool_size + extra))
            self.free += list(range(self.pool_size + extra, new_size))[::-1]
            self.pool_size = new_size
        return torch.tensor(reuse, dtype=torch.long, device=self.device)

    def _store(self, positions: torch.Tensor, values: list[torch.Tensor]) -> None:
        if positions.numel() == 0:
            return
        slots = self._take_slots(positions.numel())
        for pool, v in zip(self.pools, values, strict=False):
            pool[slots] = v
        self.slot[positions] = slots.to(torch.int32)

    def before_write(
        self, positions: torch.Tensor, obs: list[torch.Tensor], nxt: list[torch.Tensor],
        stored_obs: list[torch.Tensor], length: int,
    ) -> None:  # fmt: skip
        """Updates links for a write of ``obs`` / ``nxt`` at ``positions`` (before the write)."""
        old = self.slot[positions]
        self.free += old[old >= 0].tolist()
        self.slot[positions] = -1
        # Items just before the overwritten ones that read their next obs from them.
        prev = (positions - 1) % self.capacity
        outside = ~torch.isin(prev, positions)
        prev_linked = outside & (prev < length) & (self.slot[prev] < 0)
        if bool(prev_linked.any()):
            src = positions[prev_linked]
            self._store(prev[prev_linked], [s[src] for s in stored_obs])
        n = positions.numel()
        linked = torch.zeros(n, dtype=torch.bool, device=self.device)
        if n > 1:
            linked[:-1] = positions[1:] == (positions[:-1] + 1) % self.capacity
            for o, x in zip(obs, nxt, strict=False):
                same = (_bits(x[:-1]) == _bits(o[1:])).reshape(n - 1, -1).all(-1)
                linked[:-1] &= same
        keep = ~linked
        self._store(positions[keep], [x[keep] for x in nxt])

    def derive(self, index: torch.Tensor, stored_obs: list[torch.Tensor]) -> list[torch.Tensor]:
        """The next observations of items ``index``."""
        following = (index + 1) % self.capacity
        out = [s.index_select(0, following) for s in stored_obs]
        slots = self.slot.index_select(0, index).long()
        has = slots >= 0
        if bool(has.any()):
            rows = has.nonzero().squeeze(-1)
            for o, pool in zip(out, self.pools, strict=False):
                o[rows] = pool.index_select(0, slots[rows])
        return out

    def clear(self) -> None:
        self.slot.fill_(-1)
        self.free = list(range(self.pool_size))[::-1]

    def nbytes(self) -> int:
        return self.slot.numel() * 4 + sum(p.numel() * p.element_size() for p in self.pools)

    def state_dict(self) -> dict:
        return {"slot": self.slot.clone(), "pools": [p.clone() for p in self.pools],
                "free": list(self.free), "pool_size": self.pool_size}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.slot = state["slot"].to(self.device).clone()
        self.pools = [p.to(self.device).clone() for p in state["pools"]]
        self.free = list(state["free"])
        self.pool_size = state["pool_size"]
