"""``NextObservationDelta``: stores ``("next", obs)`` as a low-precision delta."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, as_key_list, get_or_raise, reset_mask
from rl_envs.transforms.transform import EnvSpecs, Transform

_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)
_DELTA = "delta"


def _path(key: NestedKey) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)


def _drop_if_empty(tensordict: TensorDictBase, key: tuple[str, ...]) -> None:
    """Removes the sub-TensorDict at ``key`` once the deltas are gone from it."""
    sub = tensordict.get(key, None)
    if isinstance(sub, TensorDictBase) and sub.is_empty():
        tensordict.pop(key)


class NextObservationDelta(Transform):
    """Stores each next observation as ``next_obs - obs`` in a low-precision dtype.

    One transform serves both ends of a replay pipeline (use the same instance, or
    two with the same ``in_keys``):

    * **in an env** (``TransformedEnv``): each step writes
      ``("next", "delta", key) = (next_obs - obs).to(delta_dtype)`` (the difference is
      taken in the observation's own dtype, then cast once). After ``step_mdp`` (in
      ``step_and_maybe_reset`` and on every ``rollout`` step) the full ``("next", key)``
      is dropped from the transition that is stored, while the root of the next step
      still gets the full-precision observation (and no delta). A collector's batch
      thus holds each observation once in full (at the root) plus a small delta.
    * **on stored data** (``forward``, e.g. a replay-buffer transform):
      ``("next", key) = data[key] + data[("next", "delta", key)]`` in ``restore_dtype``,
      and the delta is dropped (``drop_delta``).

    The compression is lossy: the delta is rounded to ``delta_dtype`` (float16 keeps
    ~3 significant digits of the *difference*, so slowly varying observations keep
    most of their precision; huge jumps may overflow to ``inf``).

    The observation specs are unchanged (the policy sees full observations); the
    stored layout is described by :meth:`_transform_transition_specs`, which
    :func:`~rl_envs.check_env_specs` uses. Place it outside batched envs
    (``TransformedEnv(ParallelEnv(...), NextObservationDelta())``): a batched env
    steps its sub-envs without this hook and raises when one holds it.

    Continue from a root built by ``env.step_and_maybe_reset`` or ``env.rollout``:
    ``step_mdp`` applied to a stored transition would take the *previous* observation
    (the full next one was dropped), and the next step raises if that happens.

    Args:
        in_keys: observation keys to compress. ``None`` (default): every floating-point
            leaf of the parent env's observation spec whose dtype is not in
            ``excluded_dtypes`` (recomputed when the stack changes). Outside an env,
            ``forward`` needs explicit keys (or an instance that has been in an env).
        delta_dtype: dtype of the stored delta, floating point (default ``float16``).
        restore_dtype: dtype of the rebuilt ``("next", key)``; ``"root"`` (default) is
            the dtype of ``data[key]``.
        drop_delta: remove ``("next", "delta", key)`` after rebuilding (default ``True``).
        excluded_dtypes: dtypes skipped when inferring ``in_keys`` (default: the
            integer and bool dtypes).

    Example:
        >>> import torch
        >>> from rl_envs import PendulumEnv, TransformedEnv, NextObservationDelta
        >>> env = TransformedEnv(PendulumEnv(), NextObservationDelta())
        >>> root = env.rand_action(env.reset())
        >>> td, next_root = env.step_and_maybe_reset(root)
        >>> td["next", "delta", "observation"].dtype, ("next", "observation") in td.keys(True)
        (torch.float16, False)
        >>> next_root["observation"].dtype
        torch.float32
        >>> rebuilt = env.transform[0](td.clone())  # e.g. on a replay-buffer sample
        >>> bool((rebuilt["next", "observation"] - next_root["observation"]).abs().max() < 1e-2)
        True
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        *,
        delta_dtype: torch.dtype = torch.float16,
        restore_dtype: torch.dtype | Literal["root"] = "root",
        drop_delta: bool = True,
        excluded_dtypes: tuple[torch.dtype, ...] = _INT_DTYPES,
    ) -> None:
        if not isinstance(delta_dtype, torch.dtype) or not delta_dtype.is_floating_point:
            raise ValueError(
                f"NextObservationDelta: delta_dtype must be a floating-point torch.dtype, "
                f"got {delta_dtype!r}; e.g. torch.float16 or torch.bfloat16."
            )
        if restore_dtype != "root" and not (
            isinstance(restore_dtype, torch.dtype) and restore_dtype.is_floating_point
        ):
            raise ValueError(
                f"NextObservationDelta: restore_dtype must be 'root' or a floating-point "
                f"torch.dtype, got {restore_dtype!r}."
            )
        super().__init__(in_keys=in_keys)
        self.delta_dtype = delta_dtype
        self.restore_dtype = restore_dtype
        self.drop_delta = drop_delta
        self.excluded_dtypes = tuple(excluded_dtypes)
        self._infer_keys = in_keys is None
        # set when a stored transition lost its full ("next", key): see _check_root
        self.__dict__["_dropped_next"] = False

    # ------------------------------------------------------------------ keys
    def _delta_key(self, key: NestedKey) -> tuple[str, ...]:
        return ("next", _DELTA, *_path(key))

    def _keys_or_raise(self) -> list[NestedKey]:
        if self._infer_keys and not self.in_keys:
            raise ValueError(
                "NextObservationDelta(in_keys=None) learns its keys from the env it is in; "
                "this instance has not been in one. Pass in_keys=[...] explicitly (the "
                "observation keys the env-side transform compressed)."
            )
        return self.in_keys

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        if self._infer_keys:
            keys = []
            for key in specs.observation.keys(True, True):
                dtype = specs.observation[key].dtype
                if dtype.is_floating_point and dtype not in self.excluded_dtypes:
                    keys.append(key)
            self.in_keys = as_key_list(keys)
            self.out_keys = list(self.in_keys)
        return specs

    def _transform_transition_specs(self, specs: dict[Any, Any]) -> dict[Any, Any]:
        from rl_envs.transforms._utils import unbounded_like

        for key in self.in_keys:
            full = specs.pop(("next", *_path(key)), None)
            if full is not None:
                specs[self._delta_key(key)] = unbounded_like(full, dtype=self.delta_dtype)
        return specs

    # ------------------------------------------------------------ env side
    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        mask = reset_mask(tensordict)
        if mask is None or bool(mask.all()):
            self.__dict__["_dropped_next"] = False  # every observation is fresh
        return tensordict_reset

    def _check_root(self, tensordict: TensorDictBase) -> None:
        """A root built by ``step_mdp`` from a stored transition holds a stale observation."""
        if not self.__dict__["_dropped_next"]:
            return
        for key in self.in_keys:
            if tensordict.get((_DELTA, *_path(key)), None) is not None:
                raise RuntimeError(
                    f"NextObservationDelta: the root of this step holds {(_DELTA, *_path(key))}, "
                    "so it was built by step_mdp from a stored transition whose "
                    f"{('next', *_path(key))} this transform dropped: its {key!r} is the "
                    "previous step's observation, not the current one. Continue from the root "
                    "that env.step_and_maybe_reset(td) returns (env.rollout does this itself); "
                    "do not continue from step_mdp(rollout[..., -1]) with this transform "
                    "(an rl_collectors Collector: pass use_env_rollout=False)."
                )

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self._check_root(tensordict)
        self.__dict__["_dropped_next"] = False
        for key in self.in_keys:
            obs = get_or_raise(self, tensordict, key)
            next_obs = get_or_raise(self, next_tensordict, key)
            # subtract in the observation's dtype, cast once: fewer bits lost than
            # subtracting two values already rounded to delta_dtype
            next_tensordict.set((_DELTA, *_path(key)), (next_obs - obs).to(self.delta_dtype))
        return next_tensordict

    def _post_step_mdp_hooks(
        self, tensordict: TensorDictBase, next_root: TensorDictBase | None
    ) -> tuple[TensorDictBase, TensorDictBase | None]:
        if not self.in_keys:
            return tensordict, next_root
        # step_mdp builds new top-level containers but shares sub-TensorDicts between
        # the transition's "next" and the next root: top-level entries are deleted in
        # place, nested ones removed with exclude (new containers)
        nxt = tensordict.get("next", None)
        if nxt is not None:
            nested = []
            for key in self.in_keys:
                if nxt.get(key, None) is None:
                    continue
                self.__dict__["_dropped_next"] = True
                if isinstance(key, str):
                    del nxt[key]
                else:
                    nested.append(key)
            if nested:
                tensordict.set("next", nxt.exclude(*nested))
        if next_root is not None:
            deltas = next_root.get(_DELTA, None)
            if isinstance(deltas, TensorDictBase):
                ours = {_path(k) for k in self.in_keys}
                theirs = {_path(k) for k in deltas.keys(True, True)}
                if theirs <= ours:
                    del next_root[_DELTA]
                else:
                    next_root = next_root.exclude(*[(_DELTA, *k) for k in ours])
        return tensordict, next_root

    def _supports_rollout_map(self) -> bool:
        return True

    def _rollout_map(self, trajectory: TensorDictBase) -> TensorDictBase:
        """Deltas of a whole ``[*B, T]`` rollout; the hook then drops ``("next", key)``."""
        nxt = trajectory.get("next")
        for key in self.in_keys:
            obs = get_or_raise(self, trajectory, key)
            next_obs = get_or_raise(self, nxt, key)
            nxt.set((_DELTA, *_path(key)), (next_obs - obs).to(self.delta_dtype))
        return trajectory

    # ------------------------------------------------------- stored data side
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Rebuilds ``("next", key)`` from ``data[key]`` and the stored delta.

        A key whose delta is absent but whose ``("next", key)`` is present is left
        alone (already rebuilt).

        Raises:
            KeyError: neither the delta nor ``("next", key)`` is there, or ``key`` is
                missing from the root.
        """
        for key in self._keys_or_raise():
            delta_key = self._delta_key(key)
            delta = tensordict.get(delta_key, None)
            if delta is None:
                if tensordict.get(("next", *_path(key)), None) is not None:
                    continue
                raise KeyError(
                    f"NextObservationDelta: neither {delta_key} nor {('next', *_path(key))} "
                    f"is in the data (present: "
                    f"{sorted(tensordict.keys(True, True), key=str)}). Store transitions "
                    "collected from an env holding this transform, with the same in_keys."
                )
            obs = get_or_raise(self, tensordict, key)
            dtype = obs.dtype if self.restore_dtype == "root" else self.restore_dtype
            tensordict.set(("next", *_path(key)), obs.to(dtype) + delta.to(dtype))
            if self.drop_delta:
                tensordict.pop(delta_key)
        if self.drop_delta:
            _drop_if_empty(tensordict, ("next", _DELTA))
        return tensordict

    def extra_repr(self) -> str:
        return (
            f"in_keys={self.in_keys}, delta_dtype={self.delta_dtype}, "
            f"restore_dtype={self.restore_dtype}, drop_delta={self.drop_delta}"
        )
