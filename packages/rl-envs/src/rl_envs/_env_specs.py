"""The spec accessors of :class:`~rl_envs.EnvBase` (private).

``EnvSpecs`` is the part of ``EnvBase`` that stores and serves the specs: the
``full_*_spec`` / ``*_spec`` / ``*_spec_unbatched`` properties and setters, and the key
lists (``action_keys``, ``reward_keys``, ``done_keys``, ...). Setters wrap a leaf spec
in a ``Composite``, move it to ``env.device`` and prepend the batch dims (see the
``EnvBase`` module docstring). It reads ``self._batch_size`` and ``self._device``, which
``EnvBase.__init__`` sets, and is only meant to be mixed into ``EnvBase``.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict.utils import NestedKey

from rl_envs import done as _done
from rl_envs.specs import Categorical, Composite

__all__ = ["EnvSpecs"]


def _is_composite(spec: Any) -> bool:
    return isinstance(spec, Composite)


def _complete_done(spec: Composite) -> Composite:
    """Adds ``"terminated"`` next to a lone ``"done"`` and ``"done"`` next to a lone
    ``"terminated"``, at every level (TorchRL completes done specs so)."""
    for key in list(spec.keys()):
        item = spec[key]
        if key == "done" and "terminated" not in spec:
            spec["terminated"] = item.clone()
        elif key == "terminated" and "done" not in spec:
            spec["done"] = item.clone()
        elif _is_composite(item):
            _complete_done(item)
    return spec


class EnvSpecs:
    """Spec storage and accessors, mixed into ``EnvBase`` (TorchRL's property names)."""

    _batch_size: torch.Size
    _device: torch.device
    _full_observation_spec: Composite
    _full_action_spec: Composite
    _full_state_spec: Composite
    _full_reward_spec: Composite
    _full_done_spec: Composite

    # ------------------------------------------------------------------ specs
    def _default_done_spec(self) -> Composite:
        b, d = self._batch_size, self._device
        leaf = Categorical(2, shape=(*b, 1), dtype=torch.bool, device=d)
        return Composite(
            done=leaf.clone(), terminated=leaf.clone(), truncated=leaf.clone(), shape=b, device=d
        )

    def _batched(self, spec: Any) -> Any:
        """Moves ``spec`` to the env's device and prepends the batch dims if missing."""
        b = self._batch_size
        if spec.device != self._device:
            spec = spec.to(self._device)
        if tuple(spec.shape[: len(b)]) != tuple(b):
            spec = spec.expand(*b, *spec.shape)
        return spec

    def _wrap(self, spec: Any, key: str) -> Composite:
        if _is_composite(spec):
            return self._batched(spec)
        return Composite({key: self._batched(spec)}, shape=self._batch_size, device=self._device)

    @property
    def full_observation_spec(self) -> Composite:
        """All observation entries, a ``Composite`` of shape ``batch_size``."""
        return self._full_observation_spec

    @full_observation_spec.setter
    def full_observation_spec(self, spec: Composite) -> None:
        self._full_observation_spec = self._wrap(spec, "observation")

    @property
    def observation_spec(self) -> Composite:
        """Same as :attr:`full_observation_spec` (observations are always a ``Composite``)."""
        return self._full_observation_spec

    @observation_spec.setter
    def observation_spec(self, spec: Any) -> None:
        self._full_observation_spec = self._wrap(spec, "observation")

    @property
    def full_action_spec(self) -> Composite:
        """All action entries, a ``Composite`` of shape ``batch_size``."""
        return self._full_action_spec

    @full_action_spec.setter
    def full_action_spec(self, spec: Composite) -> None:
        self._full_action_spec = self._wrap(spec, "action")

    @property
    def action_spec(self) -> Any:
        """The action's leaf spec when there is one action key, else the full Composite."""
        return self._single_leaf(self._full_action_spec)

    @action_spec.setter
    def action_spec(self, spec: Any) -> None:
        self._full_action_spec = self._wrap(spec, "action")

    @property
    def full_reward_spec(self) -> Composite:
        """All reward entries, a ``Composite`` of shape ``batch_size``."""
        return self._full_reward_spec

    @full_reward_spec.setter
    def full_reward_spec(self, spec: Composite) -> None:
        self._full_reward_spec = self._wrap(spec, "reward")

    @property
    def reward_spec(self) -> Any:
        """The reward's leaf spec when there is one reward key, else the full Composite."""
        return self._single_leaf(self._full_reward_spec)

    @reward_spec.setter
    def reward_spec(self, spec: Any) -> None:
        self._full_reward_spec = self._wrap(spec, "reward")

    @property
    def full_done_spec(self) -> Composite:
        """The done flags (``done``, ``terminated``, ``truncated``), a ``Composite``."""
        return self._full_done_spec

    @full_done_spec.setter
    def full_done_spec(self, spec: Composite) -> None:
        self.done_spec = spec

    @property
    def done_spec(self) -> Composite:
        """Same as :attr:`full_done_spec`: a ``Composite`` holding the three done flags.

        A Composite set here is completed at every level: a lone ``"done"`` gets a
        ``"terminated"`` copy and a lone ``"terminated"`` a ``"done"`` one (TorchRL)."""
        return self._full_done_spec

    @done_spec.setter
    def done_spec(self, spec: Any) -> None:
        if _is_composite(spec):
            self._full_done_spec = _complete_done(self._batched(spec))
            return
        leaf = self._batched(spec)
        self._full_done_spec = Composite(
            done=leaf.clone(),
            terminated=leaf.clone(),
            truncated=leaf.clone(),
            shape=self._batch_size,
            device=self._device,
        )

    @property
    def full_state_spec(self) -> Composite:
        """Input entries other than actions (e.g. recurrent states); empty by default."""
        return self._full_state_spec

    @full_state_spec.setter
    def full_state_spec(self, spec: Composite) -> None:
        self._full_state_spec = self._wrap(spec, "state")

    @property
    def state_spec(self) -> Composite:
        """Same as :attr:`full_state_spec`."""
        return self._full_state_spec

    @state_spec.setter
    def state_spec(self, spec: Any) -> None:
        self._full_state_spec = self._wrap(spec, "state")

    @staticmethod
    def _single_leaf(spec: Composite) -> Any:
        keys = list(spec.keys(True, True))
        if len(keys) == 1:
            return spec[keys[0]]
        return spec

    def _from_unbatched(self, spec: Any) -> Any:
        """``spec`` (without batch dims) on the env's device with the batch dims prepended.

        What the ``*_spec_unbatched`` setters store (TorchRL's behaviour): unlike the
        batched setters, the batch dims are always prepended, even when the spec's
        leading dims happen to equal them.
        """
        spec = spec.to(self._device)
        b = self._batch_size
        return spec.expand(*b, *spec.shape) if len(b) else spec

    def _unbatch(self, spec: Any) -> Any:
        n = len(self._batch_size)
        if n == 0:
            return spec.clone()
        return spec[(0,) * n]

    @property
    def observation_spec_unbatched(self) -> Composite:
        """:attr:`observation_spec` without the batch dims."""
        return self._unbatch(self.observation_spec)

    @observation_spec_unbatched.setter
    def observation_spec_unbatched(self, spec: Any) -> None:
        self.observation_spec = self._from_unbatched(spec)

    @property
    def action_spec_unbatched(self) -> Any:
        """:attr:`action_spec` without the batch dims."""
        return self._unbatch(self.action_spec)

    @action_spec_unbatched.setter
    def action_spec_unbatched(self, spec: Any) -> None:
        self.action_spec = self._from_unbatched(spec)

    @property
    def reward_spec_unbatched(self) -> Any:
        """:attr:`reward_spec` without the batch dims."""
        return self._unbatch(self.reward_spec)

    @reward_spec_unbatched.setter
    def reward_spec_unbatched(self, spec: Any) -> None:
        self.reward_spec = self._from_unbatched(spec)

    @property
    def done_spec_unbatched(self) -> Composite:
        """:attr:`done_spec` without the batch dims."""
        return self._unbatch(self.done_spec)

    @done_spec_unbatched.setter
    def done_spec_unbatched(self, spec: Any) -> None:
        self.done_spec = self._from_unbatched(spec)

    @property
    def state_spec_unbatched(self) -> Composite:
        """:attr:`state_spec` without the batch dims."""
        return self._unbatch(self.state_spec)

    @state_spec_unbatched.setter
    def state_spec_unbatched(self, spec: Any) -> None:
        self.state_spec = self._from_unbatched(spec)

    @property
    def full_observation_spec_unbatched(self) -> Composite:
        """:attr:`full_observation_spec` without the batch dims."""
        return self._unbatch(self.full_observation_spec)

    @full_observation_spec_unbatched.setter
    def full_observation_spec_unbatched(self, spec: Any) -> None:
        self.full_observation_spec = self._from_unbatched(spec)

    @property
    def full_action_spec_unbatched(self) -> Composite:
        """:attr:`full_action_spec` without the batch dims."""
        return self._unbatch(self.full_action_spec)

    @full_action_spec_unbatched.setter
    def full_action_spec_unbatched(self, spec: Any) -> None:
        self.full_action_spec = self._from_unbatched(spec)

    @property
    def full_reward_spec_unbatched(self) -> Composite:
        """:attr:`full_reward_spec` without the batch dims."""
        return self._unbatch(self.full_reward_spec)

    @full_reward_spec_unbatched.setter
    def full_reward_spec_unbatched(self, spec: Any) -> None:
        self.full_reward_spec = self._from_unbatched(spec)

    @property
    def full_done_spec_unbatched(self) -> Composite:
        """:attr:`full_done_spec` without the batch dims."""
        return self._unbatch(self.full_done_spec)

    @full_done_spec_unbatched.setter
    def full_done_spec_unbatched(self, spec: Any) -> None:
        self.full_done_spec = self._from_unbatched(spec)

    @property
    def full_state_spec_unbatched(self) -> Composite:
        """:attr:`full_state_spec` without the batch dims."""
        return self._unbatch(self.full_state_spec)

    @full_state_spec_unbatched.setter
    def full_state_spec_unbatched(self, spec: Any) -> None:
        self.full_state_spec = self._from_unbatched(spec)

    @property
    def output_spec(self) -> Composite:
        """``full_observation_spec``, ``full_reward_spec`` and ``full_done_spec`` in one
        Composite (TorchRL's layout). The entries are the env's own specs, not copies:
        set them through their properties (``env.full_observation_spec = ...``)."""
        return Composite(
            full_observation_spec=self._full_observation_spec,
            full_reward_spec=self._full_reward_spec,
            full_done_spec=self._full_done_spec,
            shape=self._batch_size,
            device=self._device,
        )

    @property
    def input_spec(self) -> Composite:
        """``full_action_spec`` and ``full_state_spec`` in one Composite (see :attr:`output_spec`)."""
        return Composite(
            full_action_spec=self._full_action_spec,
            full_state_spec=self._full_state_spec,
            shape=self._batch_size,
            device=self._device,
        )

    @property
    def output_spec_unbatched(self) -> Composite:
        """:attr:`output_spec` without the batch dims."""
        return self._unbatch(self.output_spec)

    @property
    def input_spec_unbatched(self) -> Composite:
        """:attr:`input_spec` without the batch dims."""
        return self._unbatch(self.input_spec)

    @property
    def done_keys_groups(self) -> list[list[NestedKey]]:
        """The done keys grouped by the level that holds them (one group per reset key)."""
        return _done.done_keys_groups(self._full_done_spec)

    @property
    def reset_keys(self) -> list[NestedKey]:
        """``(*prefix, "_reset")`` for each level of :attr:`full_done_spec` holding done
        flags, sorted by depth: where a partial reset is requested (``"_reset"`` at the root)."""
        return _done.reset_keys(self._full_done_spec)

    @property
    def action_keys(self) -> list[NestedKey]:
        """Leaf keys of :attr:`full_action_spec`."""
        return list(self._full_action_spec.keys(True, True))

    @property
    def reward_keys(self) -> list[NestedKey]:
        """Leaf keys of :attr:`full_reward_spec`."""
        return list(self._full_reward_spec.keys(True, True))

    @property
    def done_keys(self) -> list[NestedKey]:
        """Leaf keys of :attr:`full_done_spec`."""
        return list(self._full_done_spec.keys(True, True))

    @property
    def observation_keys(self) -> list[NestedKey]:
        """Leaf keys of :attr:`full_observation_spec`."""
        return list(self._full_observation_spec.keys(True, True))

    @property
    def state_keys(self) -> list[NestedKey]:
        """Leaf keys of :attr:`full_state_spec`."""
        return list(self._full_state_spec.keys(True, True))

    @property
    def action_key(self) -> NestedKey:
        """The action key when there is exactly one."""
        return self._only(self.action_keys, "action")

    @property
    def reward_key(self) -> NestedKey:
        """The reward key when there is exactly one."""
        return self._only(self.reward_keys, "reward")

    @staticmethod
    def _only(keys: list[NestedKey], what: str) -> NestedKey:
        if len(keys) != 1:
            raise KeyError(f"The env has {len(keys)} {what} keys {keys}; use `{what}_keys`.")
        return keys[0]
