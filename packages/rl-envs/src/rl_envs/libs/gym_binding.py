"""``GymBinding``: how one Gymnasium env's values become tensors and back.

``GymWrapper`` builds one from the env's spaces (``env.binding``); its ``_step``, the
fast single-env rollout (``rl_envs.libs._gym_fast``) and the numpy stepper of
``SerialEnv`` / ``ParallelEnv`` (``rl_envs.batched._gym_step``) all go through it, so
they read the same observations with the same dtypes and offsets and send the same
actions to Gymnasium. It holds no episode state.

* ``readers``: one :class:`ObsReader` per observation entry, in spec order: its key,
  ``read(obs, info)`` (a numpy-convertible value), the numpy dtype to store and an
  integer ``offset`` subtracted after reading (``Discrete(n, start)`` observations).
* ``action_leaves``: the action space's leaves (``rl_envs.libs._gym_spaces.Leaf``), in
  the order of ``full_action_spec``.
* ``to_gym(td)`` / ``converter(leaf)`` / ``action_sequence(actions, T)``: actions as
  Gymnasium wants them (a whole TensorDict, one leaf tensor, or ``T`` steps at once).
* ``step(action)``: ``env.step`` repeated ``frame_skip`` times (rewards summed, stopping
  at the first done).

Example:
    >>> from rl_envs import GymEnv
    >>> b = GymEnv("CartPole-v1").binding
    >>> [r.key for r in b.readers], [leaf.key for leaf in b.action_leaves]
    ([('observation',)], [('action',)])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_envs.libs import _gym_spaces as gs

__all__ = ["GymBinding", "ObsReader"]


class ObsReader(NamedTuple):
    """One observation entry read from Gymnasium's ``(obs, info)``."""

    key: tuple[str, ...]
    read: Callable[[Any, dict[str, Any]], Any]
    dtype: np.dtype
    offset: int


class GymBinding:
    """Observation readers, action leaves and action conversion of one Gymnasium env.

    Args:
        env: the Gymnasium env (single or vector).
        readers: the observation readers (see the module docstring).
        action_leaves: the action space's leaves.
        categorical: Discrete actions are indices (``True``) or one-hot (``False``).
        frame_skip: env steps per :meth:`step`.
        is_vector: ``env`` is a ``gymnasium.vector.VectorEnv``.
    """

    def __init__(
        self,
        env: Any,
        readers: list[ObsReader],
        action_leaves: list[gs.Leaf],
        *,
        categorical: bool,
        frame_skip: int,
        is_vector: bool,
    ) -> None:
        self.env = env
        self.readers = list(readers)
        self.action_leaves = list(action_leaves)
        self.categorical = categorical
        self.frame_skip = frame_skip
        self.is_vector = is_vector

    @property
    def single_plain_action(self) -> bool:
        """One action leaf at the top of the action space (not inside a Dict / Tuple)."""
        return len(self.action_leaves) == 1 and not self.action_leaves[0].path

    # ----------------------------------------------------------- observations
    def read(self, obs: Any, info: dict[str, Any]) -> dict[tuple[str, ...], torch.Tensor]:
        """Every observation entry as a fresh tensor, keyed by its (tuple) key."""
        out = {}
        for key, read, dtype, offset in self.readers:
            value = np.array(read(obs, info), dtype=dtype)
            if offset:
                value -= offset
            out[key] = torch.from_numpy(value)
        return out

    # ---------------------------------------------------------------- actions
    def to_gym(self, td: TensorDictBase) -> Any:
        """The action of ``td`` (every action leaf) in Gymnasium's format."""
        cat = self.categorical
        values = [gs.action_to_gym(leaf, td.get(leaf.key), cat) for leaf in self.action_leaves]
        if not self.is_vector:
            values = [v.item() if v.ndim == 0 and v.dtype.kind in "iu" else v for v in values]
        return gs.assemble(self.action_leaves, values)

    def converter(self, leaf: gs.Leaf) -> Callable[[torch.Tensor], Any]:
        """``tensor -> Gymnasium value`` for one leaf of a single env, as :meth:`to_gym`."""
        spaces = gs.gymnasium_module().spaces
        space, cat = leaf.space, self.categorical
        if isinstance(space, spaces.Discrete):
            start = int(space.start)
            if cat:
                return lambda v: int(v) + start
            return lambda v: int((v.detach() if v.requires_grad else v).numpy().argmax()) + start
        if isinstance(space, spaces.Box):
            dtype = space.dtype

            def box(v: torch.Tensor) -> np.ndarray:
                arr = (v.detach() if v.requires_grad else v).numpy()
                return arr if arr.dtype == dtype else arr.astype(dtype)

            return box

        def generic(v: torch.Tensor) -> Any:
            arr = gs.action_to_gym(leaf, v.detach(), cat)
            return arr.item() if arr.ndim == 0 and arr.dtype.kind in "iu" else arr

        return generic

    def action_sequence(self, actions: dict[Any, torch.Tensor], steps: int) -> list[Any]:
        """``steps`` Gymnasium actions of a single env from ``{key: [steps, ...]}``."""
        cat = self.categorical
        leaves = self.action_leaves
        per_leaf = []
        for leaf in leaves:
            arr = gs.action_to_gym(leaf, actions[_key(leaf.key, actions)], cat)
            per_leaf.append(arr.tolist() if arr.ndim == 1 and arr.dtype.kind in "iu" else list(arr))
        if self.single_plain_action:
            return per_leaf[0]
        return [gs.assemble(leaves, [vals[i] for vals in per_leaf]) for i in range(steps)]

    def assemble(self, values: list[Any]) -> Any:
        """Per-leaf Gymnasium values (in :attr:`action_leaves` order) as one action."""
        return gs.assemble(self.action_leaves, values)

    # ------------------------------------------------------------------- step
    def step(self, action: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """``env.step(action)``, repeated ``frame_skip`` times (rewards summed)."""
        obs, reward, term, trunc, info = self.env.step(action)
        for _ in range(self.frame_skip - 1):
            if term or trunc:
                break
            obs, r, term, trunc, info = self.env.step(action)
            reward = reward + r
        return obs, reward, term, trunc, info

    def is_box(self, leaf: gs.Leaf) -> bool:
        """Whether ``leaf`` is a ``Box`` space."""
        return isinstance(leaf.space, gs.gymnasium_module().spaces.Box)


def _key(key: tuple[str, ...], actions: dict[Any, torch.Tensor]) -> Any:
    """``key`` as ``actions`` spells it (a string for top-level keys, else the tuple)."""
    if key in actions:
        return key
    return key[0] if len(key) == 1 else key
