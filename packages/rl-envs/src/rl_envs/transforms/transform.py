"""``Transform``: the base class of every env transform.

A transform maps TensorDicts on their way out of an env (reset and step
outputs) and, for action transforms, on their way in (through ``inv``). It
also rewrites the env's specs so that a ``TransformedEnv`` always describes
what its user sees. The same object works on a bare TensorDict (a replay
buffer sample, say): ``transform(td)`` returns ``td`` transformed.

The public protocol (what ``TransformedEnv`` and ``Compose`` call):

- ``step(td, next_td) -> next_td``: maps a step's flat output (``td`` is its input);
- ``reset(td, td_reset) -> td_reset``: maps a reset's output (``td``: its input);
- ``inv(td) -> td``: maps an input (actions, states) to what the inner env reads;
- ``transform_specs(specs)`` / ``transform_<kind>_spec(spec)``: the specs the user sees;
- optional: ``supports_rollout_map()`` / ``rollout_map(trajectory)`` (a whole rollout
  at once), ``steps_inner_env`` + ``inner_env`` (transforms that step the env beneath
  them, handed over by the env), ``_post_step_mdp_hooks`` (edits stored transitions).

The hooks a subclass overrides (TorchRL's names), all optional:

- ``_apply_transform(x)`` / ``_inv_apply_transform(x)``: per-key tensor maps
  used by the default ``_call`` / ``_inv_call`` (``in_keys -> out_keys``,
  ``out_keys_inv -> in_keys_inv``).
- ``_call(next_td)``: the step output (flat, not nested under ``"next"``).
- ``_step(td, next_td)``: like ``_call`` but also sees the step's input ``td``.
- ``_reset(td, td_reset)``: the reset output; ``td`` holds the reset's input
  (e.g. the ``"_reset"`` mask of a partial reset).
- ``transform_observation_spec`` / ``transform_reward_spec`` /
  ``transform_done_spec`` / ``transform_action_spec`` / ``transform_state_spec``:
  each receives a *full* Composite (keyed by entry names) and returns it;
  ``transform_specs`` sees them all at once for transforms that move entries
  between categories (e.g. ``RewardSum`` reads the reward spec to write an
  observation spec).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase
from torch import nn

from rl_envs.transforms._utils import (
    NestedKey,
    as_key_list,
    is_composite,
    missing_key_error,
    spec_has,
)

if TYPE_CHECKING:
    from rl_envs.transformed_env import TransformedEnv


FORWARD_NOT_IMPLEMENTED = "class {} cannot be executed without a parent environment."
"""The message (``.format(type(transform))``) of transforms that only work inside an env."""


@dataclass
class EnvSpecs:
    """The five full specs of an env, as transforms see and rewrite them.

    Each field is a ``Composite`` keyed by entry names (``observation``: the
    observation entries, ``reward``: ``"reward"``, ``done``: ``"done"``,
    ``"terminated"``, ``"truncated"``, ``action``: ``"action"``, ``state``:
    non-action inputs such as recurrent states).
    """

    observation: Any
    reward: Any
    done: Any
    action: Any
    state: Any

    def clone(self) -> EnvSpecs:
        return EnvSpecs(
            self.observation.clone(),
            self.reward.clone(),
            self.done.clone(),
            self.action.clone(),
            self.state.clone(),
        )


class Transform(nn.Module):
    """Base class of env transforms.

    Args:
        in_keys: entries read on the way out of the env (reset and step outputs).
        out_keys: entries written; defaults to ``in_keys`` (in place).
        in_keys_inv: entries the inner env reads on the way in (e.g. its ``"action"``).
        out_keys_inv: entries the outer world writes, mapped to ``in_keys_inv``
            by ``inv``; defaults to ``in_keys_inv``.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Double(Transform):
        ...     def _apply_transform(self, x):
        ...         return 2 * x
        >>> Double(in_keys=["obs"])(TensorDict(obs=torch.ones(2)))["obs"]
        tensor([2., 2.])
    """

    invertible: bool = False

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        super().__init__()
        self.in_keys = as_key_list(in_keys)
        self.out_keys = as_key_list(out_keys) if out_keys is not None else list(self.in_keys)
        self.in_keys_inv = as_key_list(in_keys_inv)
        self.out_keys_inv = (
            as_key_list(out_keys_inv) if out_keys_inv is not None else list(self.in_keys_inv)
        )
        for name, a, b in (
            ("out_keys", self.in_keys, self.out_keys),
            ("out_keys_inv", self.in_keys_inv, self.out_keys_inv),
        ):
            # no inputs and some outputs: a transform that creates entries (e.g. adds pixels),
            # as TorchRL allows; a pairing of inputs to outputs must match one to one
            if len(a) != len(b) and a:
                raise ValueError(
                    f"{type(self).__name__} expects the same number of input and output "
                    f"keys: {name} must have one key per input key, "
                    f"got {len(a)} inputs and {len(b)} outputs ({a} vs {b})."
                )
        # Stored outside nn.Module's registry: the container owns us, not the reverse.
        self.__dict__["_container"] = None
        self.__dict__["_missing_tolerance"] = False

    # ------------------------------------------------------------------ data
    def _apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(
            f"{type(self).__name__} defines no _apply_transform: override it, or _call / _step."
        )

    def _inv_apply_transform(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(
            f"{type(self).__name__} defines no _inv_apply_transform: it is not invertible."
        )

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Applies ``_apply_transform`` to each ``in_key`` and writes ``out_key``."""
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=bool(self.in_keys)):
            value = next_tensordict.get(in_key, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise missing_key_error(self, in_key, next_tensordict)
            next_tensordict.set(out_key, self._apply_transform(value))
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Transforms a TensorDict outside of an env (e.g. a replay-buffer sample)."""
        return self._call(tensordict)

    def step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Transforms a step's flat output ``next_tensordict`` (public protocol; the
        subclass hook is ``_step``)."""
        return self._step(tensordict, next_tensordict)

    def reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        """Transforms a reset's output ``tensordict_reset`` (public protocol; the subclass
        hook is ``_reset``)."""
        return self._reset(tensordict, tensordict_reset)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Transforms a step's output ``next_tensordict``; ``tensordict`` is its input."""
        return self._call(next_tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        """Transforms a reset's output; keys absent from a reset (e.g. reward) are skipped."""
        self.__dict__["_missing_tolerance"] = True
        try:
            return self._call(tensordict_reset)
        finally:
            self.__dict__["_missing_tolerance"] = False

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        """Edits a reset's input before the inner env sees it (identity by default)."""
        return tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv, strict=True):
            value = tensordict.get(out_key, None)
            if value is None:
                raise missing_key_error(self, out_key, tensordict, role="out_key_inv")
            tensordict.set(in_key, self._inv_apply_transform(value))
        return tensordict

    def _has_inverse(self) -> bool:
        """Whether ``inv`` may change anything (lets a TransformedEnv skip the input copy)."""
        return (
            bool(self.in_keys_inv)
            or type(self).inv is not Transform.inv
            or type(self)._inv_call is not Transform._inv_call
        )

    @property
    def inv_writes_input(self) -> bool:
        """Whether, inside a ``TransformedEnv``, the inverse's outputs (``in_keys_inv``) are
        also written into the caller's TensorDict, so a rollout holds them (TorchRL's
        ``ActionDiscretizer`` with a renamed action). ``False``: the inverse works on a copy."""
        return False

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Maps an input (e.g. an action written by a policy) to what the inner env reads.

        Works on a shallow copy, as TorchRL: the caller's TensorDict keeps its entries.
        """
        return self._inv_call(tensordict.clone(False))

    # ----------------------------------------------------- whole trajectories
    def supports_rollout_map(self) -> bool:
        """Whether :meth:`rollout_map` gives, on a whole rollout, what stepping gives.

        Part of the public protocol (optional): ``TransformedEnv`` keeps its base env's
        fast rollout backend only when every transform says ``True``. Subclasses
        override ``_supports_rollout_map`` / ``_rollout_map`` (TorchRL-style hooks).
        """
        return self._supports_rollout_map()

    def rollout_map(self, trajectory: TensorDictBase) -> TensorDictBase:
        """Applies the transform to a whole ``[*B, T]`` rollout (root + ``"next"``)."""
        return self._rollout_map(trajectory)

    def _supports_rollout_map(self) -> bool:
        """Whether :meth:`_rollout_map` reproduces this transform's step-by-step effect.

        True for pure per-key maps (only ``_apply_transform`` overridden, no inverse).
        """
        cls = type(self)
        return (
            cls._call is Transform._call
            and cls._step is Transform._step
            and cls._reset is Transform._reset
            and cls.forward is Transform.forward
            and not self._has_inverse()
        )

    def _rollout_map(self, trajectory: TensorDictBase) -> TensorDictBase:
        """Applies the transform to a whole rollout (batch ``[*B, T]``, root + ``"next"``).

        Used by ``TransformedEnv`` to keep the base env's fast rollout loop; only
        called when :meth:`_supports_rollout_map` is true.
        """
        nxt = trajectory.get("next")
        self._call(nxt)
        root = trajectory.exclude("next")
        self.__dict__["_missing_tolerance"] = True
        try:
            root = self._call(root)
        finally:
            self.__dict__["_missing_tolerance"] = False
        root.set("next", nxt)
        return root

    # ------------------------------------------------------ after step_mdp
    def _post_step_mdp_hooks(
        self, tensordict: TensorDictBase, next_root: TensorDictBase | None
    ) -> tuple[TensorDictBase, TensorDictBase | None]:
        """Edits a stored transition and the next root once ``step_mdp`` has built the latter.

        ``TransformedEnv`` calls it in ``step_and_maybe_reset`` (after ``step_mdp``, before
        done entries are reset) and on every step of ``rollout``. ``tensordict`` is the
        transition the caller stores (root + ``"next"``); ``next_root`` is what the next
        step starts from, ``None`` where the rollout builds none (its last step). It may
        also receive a whole ``[*B, T]`` trajectory with ``next_root=None`` (the fast
        rollout path). Identity by default; override it to drop transient entries from
        the stored data (e.g. :class:`NextObservationDelta`).
        """
        return tensordict, next_root

    def _has_post_step_mdp_hook(self) -> bool:
        """Whether :meth:`_post_step_mdp_hooks` is overridden (it then must run)."""
        return type(self)._post_step_mdp_hooks is not Transform._post_step_mdp_hooks

    def _transform_transition_specs(self, specs: dict[Any, Any]) -> dict[Any, Any]:
        """The specs of a stored transition's leaves, keyed by full path (tuples).

        ``specs`` holds the root entries (observations, actions, states, done flags)
        and ``("next", ...)`` entries as the env's specs describe them. Identity by
        default; a transform whose post-step hook changes the stored layout rewrites
        it. :func:`~rl_envs.check_env_specs` compares rollouts with the result.
        """
        return specs

    # ----------------------------------------------------------------- specs
    def transform_leaf_spec(self, spec: Any) -> Any:
        """The spec of ``out_key`` given the spec of ``in_key`` (identity by default)."""
        return spec

    def transform_leaf_spec_inv(self, spec: Any) -> Any:
        """The spec of ``out_key_inv`` (outside) given that of ``in_key_inv`` (inside)."""
        return spec

    def _map_specs(self, composite: Any) -> Any:
        if not is_composite(composite):  # a bare leaf spec: TorchRL transforms it directly
            return self.transform_leaf_spec(composite.clone())
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=bool(self.in_keys)):
            if spec_has(composite, in_key):
                composite[out_key] = self.transform_leaf_spec(composite[in_key].clone())
        return composite

    def _map_specs_inv(self, composite: Any) -> Any:
        if not is_composite(composite):
            return self.transform_leaf_spec_inv(composite.clone())
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv, strict=True):
            if spec_has(composite, in_key):
                inner = composite[in_key]
                if out_key != in_key:
                    del composite[in_key]
                composite[out_key] = self.transform_leaf_spec_inv(inner.clone())
        return composite

    def transform_observation_spec(self, observation_spec: Any) -> Any:
        return self._map_specs(observation_spec)

    def transform_reward_spec(self, reward_spec: Any) -> Any:
        return self._map_specs(reward_spec)

    def transform_done_spec(self, done_spec: Any) -> Any:
        return done_spec

    def transform_action_spec(self, action_spec: Any) -> Any:
        return self._map_specs_inv(action_spec)

    def transform_state_spec(self, state_spec: Any) -> Any:
        return self._map_specs_inv(state_spec)

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        """Rewrites all five full specs; the default calls the per-category hooks."""
        specs.observation = self.transform_observation_spec(specs.observation)
        specs.reward = self.transform_reward_spec(specs.reward)
        specs.done = self.transform_done_spec(specs.done)
        specs.action = self.transform_action_spec(specs.action)
        specs.state = self.transform_state_spec(specs.state)
        return specs

    def transform_env_batch_size(self, batch_size: torch.Size) -> torch.Size:
        """The env's batch size seen through this transform (identity by default)."""
        return batch_size

    def _stacked_action_dims(self, action_keys: list[NestedKey]) -> dict[NestedKey, int]:
        """Action entries this transform reads as a stack of any length: ``{key: dim}``,
        the stack dim counted after the batch dims (0: the first dim after them).

        The env checks the first action of such a stack against its spec (whose stack
        dim has length 1). Empty by default; :class:`MultiAction` overrides it.
        """
        return {}

    def transform_env_device(self, device: torch.device | None) -> torch.device | None:
        """The env's device seen through this transform (identity by default; ``None``:
        the outputs live on several devices)."""
        return device

    # ------------------------------------------------------------ inner env
    steps_inner_env: bool = False
    """``True`` for transforms that step or reset the env beneath them (e.g.
    ``FrameSkipTransform``, ``NoopResetEnv``): the ``TransformedEnv`` holding them hands
    them that env (its base env seen through the transforms placed before them) with
    :meth:`set_inner_env` whenever its stack changes."""

    @property
    def inner_env(self) -> Any:
        """The env beneath this transform (see :attr:`steps_inner_env`), or ``None``."""
        return self.__dict__.get("_inner_env")

    def set_inner_env(self, inner_env: Any) -> None:
        """Called by the enclosing ``TransformedEnv``; ``None`` detaches."""
        self.__dict__["_inner_env"] = inner_env

    # -------------------------------------------------------------- plumbing
    @property
    def container(self) -> Any:
        """The ``Compose`` or ``TransformedEnv`` holding this transform, or ``None``."""
        return self.__dict__["_container"]

    def set_container(self, container: Any) -> None:
        """Records the ``Compose`` or env holding this transform.

        A transform already inside an env cannot join another one (``clone()`` it); one
        that only sits in a free-standing ``Compose`` moves to the new container.
        """
        current = self.__dict__["_container"]
        if current is not None and current is not container and self._env_and_index()[0]:
            raise RuntimeError(
                f"{type(self).__name__} already belongs to {type(current).__name__}: a transform "
                "lives in one env at a time. Use transform.clone() to reuse it elsewhere."
            )
        self.__dict__["_container"] = container

    def reset_parent(self) -> None:
        """Detaches the transform from its container (and from the env beneath it)."""
        self.__dict__["_container"] = None
        self.__dict__["_inner_env"] = None

    def _env_and_index(self) -> tuple[TransformedEnv | None, list[Transform]]:
        """The enclosing TransformedEnv and the transforms that come before this one.

        A container that is itself a ``Transform`` is a ``Compose`` (the only transform
        holding others); the first one that is not is the env.
        """
        preceding: list[Transform] = []
        node: Transform = self
        container = node.container
        while isinstance(container, Transform):
            index = next(i for i, t in enumerate(container.transforms) if t is node)
            preceding = list(container.transforms[:index]) + preceding
            node = container
            container = node.container
        return container, preceding

    @property
    def parent(self) -> TransformedEnv | None:
        """The env up to (excluding) this transform, or ``None`` outside an env.

        It is a new ``TransformedEnv`` holding the base env and clones of the
        preceding transforms: use it to read specs or roll out, not to edit the stack.
        """
        env, preceding = self._env_and_index()
        if env is None:
            return None
        return env._env_with([t.clone() for t in preceding])

    def _invalidate_specs(self) -> None:
        """Tells the enclosing env that this transform's specs changed."""
        env, _ = self._env_and_index()
        if env is not None:
            env.empty_cache()

    def clone(self) -> Transform:
        """A deep copy, detached from any container."""
        container = self.__dict__["_container"]
        inner = self.__dict__.get("_inner_env")
        self.__dict__["_container"] = None
        self.__dict__["_inner_env"] = None
        try:
            out = copy.deepcopy(self)
        finally:
            self.__dict__["_container"] = container
            self.__dict__["_inner_env"] = inner
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_container"] = None
        if "_inner_env" in state:  # only transforms that step an env hold one
            state["_inner_env"] = None
        return state

    def extra_repr(self) -> str:
        parts = [f"in_keys={self.in_keys}", f"out_keys={self.out_keys}"]
        if self.in_keys_inv:
            parts += [f"in_keys_inv={self.in_keys_inv}", f"out_keys_inv={self.out_keys_inv}"]
        return ", ".join(parts)
