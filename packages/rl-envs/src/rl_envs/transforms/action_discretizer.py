"""``ActionDiscretizer``: a discrete action space over a continuous (Bounded) one."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import torch

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import EnvSpecs, Transform

_OFFSETS = {"median": 0.5, "low": 0.0, "high": 1.0}


class ActionDiscretizer(Transform):
    """Splits each dim of a Bounded action into ``num_intervals`` bins.

    The policy picks one bin per action dim (``Categorical`` /
    ``MultiCategorical`` indices with ``categorical=True``, one-hot vectors
    otherwise); the inverse maps bin ``i`` of ``[low, high]`` to
    ``low + (high - low) * (i + offset) / n`` with ``offset`` 0.5 (``"median"``,
    the default), 0 (``"low"``), 1 (``"high"``) or uniform in [0, 1) (``"random"``).

    Args:
        num_intervals: bins per action dim (an int, or one per dim).
        action_key: the env's action entry.
        out_action_key: the outer name (default ``action_key``).
        sampling: an :class:`ActionDiscretizer.SamplingStrategy` (``MEDIAN``, ``LOW``,
            ``HIGH``, ``RANDOM``) or its name as a string, any case.
        categorical: indices (``True``) or one-hot vectors (``False``).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ActionDiscretizer(4)
        >>> t.set_bounds(torch.tensor([-1.0]), torch.tensor([1.0]))
        >>> t.inv(TensorDict(action=torch.tensor([0])))["action"]
        tensor([-0.7500])
    """

    invertible = True

    class SamplingStrategy(IntEnum):
        """Where in its bin a discrete action lands (TorchRL's enum)."""

        MEDIAN = 0
        LOW = 1
        HIGH = 2
        RANDOM = 3

    def __init__(
        self,
        num_intervals: int | torch.Tensor,
        action_key: NestedKey = "action",
        out_action_key: NestedKey | None = None,
        sampling: Any = None,
        categorical: bool = True,
    ) -> None:
        out_key = out_action_key if out_action_key is not None else action_key
        super().__init__(in_keys_inv=[action_key], out_keys_inv=[out_key])
        name = "median" if sampling is None else getattr(sampling, "name", sampling)
        name = str(name).lower()
        if name not in (*_OFFSETS, "random"):
            raise ValueError(f"ActionDiscretizer: unknown sampling {sampling!r}.")
        self.sampling = self.SamplingStrategy[name.upper()]
        self.num_intervals = num_intervals
        self.categorical = categorical
        self.action_key = action_key
        self.out_action_key = out_key
        self.low: torch.Tensor | None = None
        self.high: torch.Tensor | None = None

    @property
    def inv_writes_input(self) -> bool:
        """With ``out_action_key`` set, the env's (continuous) action is written next to the
        policy's discrete one: a rollout holds both, as in TorchRL."""
        return self.out_action_key != self.action_key

    def set_bounds(self, low: torch.Tensor, high: torch.Tensor) -> None:
        """The env action's feature-shaped bounds (set from the spec inside an env)."""
        self.low, self.high = low, high

    def _nvec(self, dims: int) -> torch.Tensor:
        n = torch.as_tensor(self.num_intervals, dtype=torch.int64)
        return n.expand(dims) if n.ndim == 0 else n

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        if self.low is None or self.high is None:
            raise RuntimeError(
                "ActionDiscretizer needs bounds: use it in an env or call set_bounds."
            )
        dims = self.low.shape[-1] if self.low.ndim else 1
        nvec = self._nvec(dims).to(x.device)
        if self.categorical:
            idx = x.long()
        else:
            idx = torch.stack([c.long().argmax(-1) for c in x.split(nvec.tolist(), dim=-1)], -1)
            if self.low.ndim == 0:  # a scalar action
                idx = idx.squeeze(-1)
        if self.sampling == self.SamplingStrategy.RANDOM:
            offset = torch.rand(idx.shape, device=x.device)
        else:
            offset = _OFFSETS[self.sampling.name.lower()]
        low, high = self.low.to(x.device), self.high.to(x.device)
        n = nvec.to(low.dtype)
        if low.ndim == 0:  # a scalar action: one bin count, no feature dim
            n = n[0]
        return low + (high - low) * (idx.to(low.dtype) + offset) / n

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        from rl_envs.specs import Bounded, Categorical, MultiCategorical, MultiOneHot, OneHot

        action = specs.action[self.action_key]
        if not isinstance(action, Bounded):
            raise TypeError(
                f"ActionDiscretizer needs a Bounded action spec at {self.action_key!r}, got "
                f"{type(action).__name__}."
            )
        batch = tuple(specs.action.shape)
        feature = tuple(action.shape[len(batch) :])
        if len(feature) > 1:
            raise ValueError(
                f"ActionDiscretizer supports [*B, d] and scalar [*B] actions, got feature "
                f"shape {feature}."
            )
        if not feature:  # a scalar action: one dim
            feature = (1,)
        index = (0,) * len(batch)
        self.low = action.space.low.expand(action.shape)[index].clone()
        self.high = action.space.high.expand(action.shape)[index].clone()
        nvec = self._nvec(feature[0])
        if self.categorical:
            if bool((nvec == nvec[0]).all()):
                new: Any = Categorical(int(nvec[0]), shape=action.shape, device=action.device)
            else:
                new = MultiCategorical(nvec.tolist(), shape=action.shape, device=action.device)
        elif feature[0] == 1:
            new = OneHot(int(nvec[0]), shape=(*batch, int(nvec[0])), device=action.device)
        else:
            new = MultiOneHot(nvec.tolist(), shape=(*batch, int(nvec.sum())), device=action.device)
        if self.out_action_key != self.action_key:
            # the env's action, written next to the policy's: a state entry (TorchRL's layout)
            specs.state[self.action_key] = action
            del specs.action[self.action_key]
        specs.action[self.out_action_key] = new
        return specs
