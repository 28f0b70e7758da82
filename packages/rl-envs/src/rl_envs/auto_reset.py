"""Envs that reset themselves: ``AutoResetTransform`` and its container ``AutoResetEnv``.

Some simulators (vectorised Gymnasium envs, many GPU simulators) start the next episode
inside the step that ends one: the observation they return with ``done=True`` is already
the first observation of the next episode. Under the env contract the final observation
belongs to ``("next", ...)`` and the first one of the next episode to the root after the
reset. ``AutoResetTransform`` reconciles the two: at a done step it keeps the observations
the env returned (the next episode's first ones) for the reset that follows, and writes a
fill value (NaN for floats, -1 for signed integers, ``False`` for booleans) in their place
under ``"next"``, since the true final observation is lost. ``AutoResetEnv`` then serves a
partial reset (``"_reset"``) from what the transform kept instead of calling the env's
``_reset``.

``SomeEnv(..., auto_reset=True)`` (TorchRL's keyword, read by ``EnvBase.__new__``) returns
``AutoResetEnv(SomeEnv(...), AutoResetTransform(replace=auto_reset_replace))``.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.env_base import EnvBase
from rl_envs.transformed_env import TransformedEnv
from rl_envs.transforms.compose import Compose
from rl_envs.transforms.transform import FORWARD_NOT_IMPLEMENTED, Transform

__all__ = ["AutoResetEnv", "AutoResetTransform"]


class AutoResetTransform(Transform):
    """Moves the first observations of the next episode from a done step to the reset.

    Works inside an :class:`AutoResetEnv` only. Observation entries (and done groups:
    a done flag ``(*prefix, "done")`` masks the observations under ``prefix``) are handled.

    Args:
        replace: ``False`` leaves the env's values under ``"next"`` as they are (no fill);
            it overrides the fill values. Default: replace.
        fill_float: fill of floating-point entries (``"nan"`` or a number; ``None``: keep).
        fill_int: fill of signed integer entries (``None``: keep).
        fill_bool: fill of other (boolean, unsigned) entries (``None``: keep).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_envs import Categorical, Composite, EnvBase, Unbounded
        >>> class Counter(EnvBase):  # resets itself after 3 steps
        ...     def __init__(self, **kw):
        ...         super().__init__(**kw)
        ...         self.observation_spec = Composite(observation=Unbounded((1,)))
        ...         self.action_spec = Unbounded((1,))
        ...     def _reset(self, td):
        ...         self.n = 0
        ...         return TensorDict(observation=torch.zeros(1))
        ...     def _step(self, td):
        ...         self.n += 1
        ...         done = self.n == 3
        ...         obs = torch.full((1,), float(self.n))
        ...         if done:
        ...             obs = self._reset(None)["observation"]
        ...         return TensorDict(observation=obs, reward=torch.ones(1),
        ...                           terminated=torch.tensor([done]))
        ...     def _set_seed(self, seed):
        ...         pass
        >>> env = Counter(auto_reset=True)
        >>> type(env).__name__
        'AutoResetEnv'
        >>> r = env.rollout(5, break_when_any_done=False)
        >>> r["next", "observation"].flatten().tolist()
        [1.0, 2.0, nan, 1.0, 2.0]
        >>> r["observation"].flatten().tolist()
        [0.0, 1.0, 2.0, 0.0, 1.0]
    """

    def __init__(
        self,
        *,
        replace: bool | None = None,
        fill_float: float | str | None = "nan",
        fill_int: int | None = -1,
        fill_bool: bool | None = False,
    ) -> None:
        super().__init__()
        if replace is False:
            fill_float = fill_int = fill_bool = None
        self.fill_float = float("nan") if fill_float == "nan" else fill_float
        self.fill_int = fill_int
        self.fill_bool = fill_bool
        self._saved: dict[Any, tuple[torch.Tensor, torch.Tensor]] = {}

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(FORWARD_NOT_IMPLEMENTED.format(type(self)))

    def _fill(self, dtype: torch.dtype) -> Any:
        if dtype.is_floating_point:
            return self.fill_float
        if dtype.is_signed:
            return self.fill_int
        return self.fill_bool

    def _groups(self) -> list[tuple[tuple[str, ...], Any]]:
        """``(prefix, done key)`` of each done group of the env below."""
        env = self.container
        if not isinstance(env, AutoResetEnv):
            raise RuntimeError(
                f"{type(self).__name__} must be the transform of an AutoResetEnv (build one "
                "with AutoResetEnv(env, AutoResetTransform()) or SomeEnv(..., auto_reset=True))."
            )
        groups = []
        for key in env.base_env.done_keys:
            key = key if isinstance(key, tuple) else (key,)
            if key[-1] == "done":
                groups.append((key[:-1], key))
        return groups

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        obs_keys = [
            k if isinstance(k, tuple) else (k,)
            for k in self.container.base_env.full_observation_spec.keys(True, True)
        ]
        for prefix, done_key in self._groups():
            done = next_tensordict.get(done_key, None)
            if done is None or not bool(done.any()):
                continue
            for key in obs_keys:
                if key[: len(prefix)] != prefix:
                    continue
                value = next_tensordict.get(key, None)
                if value is None:
                    continue
                mask = done.reshape(*done.shape[:-1], *([1] * (value.ndim - done.ndim + 1)))
                self._saved[key] = (value, done)
                fill = self._fill(value.dtype)
                if fill is not None:
                    next_tensordict.set(key, torch.where(mask, torch.full_like(value, fill), value))
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for key, (value, done) in self._saved.items():
            previous = tensordict_reset.get(key, None)
            if previous is not None and previous.shape == value.shape:
                mask = done.reshape(*done.shape[:-1], *([1] * (value.ndim - done.ndim + 1)))
                value = torch.where(mask, value, previous)
            tensordict_reset.set(key, value)
        self._saved = {}
        return tensordict_reset


class AutoResetEnv(TransformedEnv):
    """The container of an :class:`AutoResetTransform` (TorchRL's class).

    A reset that holds ``"_reset"`` (or a nested reset key) does not call the base env's
    ``_reset``: the env already started the next episode, whose first observations the
    transform kept. A reset without one (the first reset) calls it as usual.

    Args:
        base_env: an env that resets itself at the end of each episode.
        transform: an :class:`AutoResetTransform` (default: one with default fills).
    """

    def __init__(self, base_env: EnvBase, transform: Transform | None = None, **kwargs: Any):
        super().__init__(
            base_env, AutoResetTransform() if transform is None else transform, **kwargs
        )

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        reset_keys = self.base_env.reset_keys
        if tensordict is not None and any(k in tensordict.keys(True) for k in reset_keys):
            state_keys = list(self.base_env.full_state_spec.keys(True, True))
            out = tensordict.select(*state_keys, strict=False)
            self.base_env._fill_missing_done(out, reset=True)
        else:
            out = self.base_env._reset(tensordict, **kwargs)
            self.base_env._fill_missing_done(out, reset=True)
            for t in _auto_reset_transforms(self.transform):  # a full reset: stale values
                t._saved = {}
        source = tensordict if tensordict is not None else out.empty()
        return self.transform.reset(source, out)

    def insert_transform(self, index: int, transform: Transform) -> TransformedEnv:
        raise RuntimeError(
            f"Cannot insert a transform in {type(self).__name__}: wrap it instead, "
            "TransformedEnv(env, transform)."
        )


def _auto_reset_transforms(transform: Transform) -> list[AutoResetTransform]:
    """The AutoResetTransforms in ``transform`` (itself, or inside nested Composes)."""
    if isinstance(transform, AutoResetTransform):
        return [transform]
    if isinstance(transform, Compose):
        return [t for sub in transform.transforms for t in _auto_reset_transforms(sub)]
    return []


def _wrap(env: EnvBase, replace: bool) -> AutoResetEnv:
    return AutoResetEnv(env, AutoResetTransform(replace=replace))


EnvBase.auto_reset_wrapper = _wrap  # what EnvBase(..., auto_reset=True) returns
