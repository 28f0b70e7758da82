"""``register_gym``: an rl_envs env as a Gymnasium env (``gymnasium.make(id)``).

The reverse of :class:`~rl_envs.GymWrapper`: the env's specs become Gymnasium spaces
(``Composite`` -> ``Dict``, ``Bounded`` / ``Unbounded`` -> ``Box``, ``Categorical`` ->
``Discrete``, ``Binary`` -> ``MultiBinary``, ``MultiCategorical`` -> ``MultiDiscrete``,
``OneHot`` -> ``Discrete``), ``reset`` returns ``(observation, info)`` and ``step`` returns
``(observation, reward, terminated, truncated, info)``. Observations are nested dicts of
tensors, or of numpy arrays with ``to_numpy=True``; the entries named in ``info_keys``
go to ``info`` instead. Only unbatched envs (``batch_size == ()``) are exported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_envs.env_base import EnvBase
from rl_envs.libs._gym_spaces import gymnasium_module
from rl_envs.specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    OneHot,
    Unbounded,
)
from rl_envs.utils import step_mdp

__all__ = ["register_gym", "spec_to_space"]


def spec_to_space(spec: Any) -> Any:
    """The Gymnasium space of an (unbatched) spec.

    Raises:
        TypeError: a spec kind without a Gymnasium counterpart.

    Example:
        >>> from rl_envs.specs import Bounded
        >>> spec_to_space(Bounded(-1.0, 1.0, shape=(2,)))
        Box(-1.0, 1.0, (2,), float32)
    """
    spaces = gymnasium_module().spaces
    if isinstance(spec, Composite):
        return spaces.Dict({key: spec_to_space(spec[key]) for key in spec})
    dtype = torch.zeros((), dtype=spec.dtype).numpy().dtype
    if isinstance(spec, OneHot):
        return spaces.Discrete(spec.shape[-1])
    if isinstance(spec, Binary):
        return spaces.MultiBinary(list(spec.shape))
    if isinstance(spec, Categorical):
        return spaces.Discrete(int(spec.space.n))
    if isinstance(spec, MultiCategorical):
        return spaces.MultiDiscrete(np.asarray(spec.space.nvec))
    if isinstance(spec, Bounded):
        low, high = spec.space.low.cpu().numpy(), spec.space.high.cpu().numpy()
        return spaces.Box(low.astype(dtype), high.astype(dtype), tuple(spec.shape), dtype)
    if isinstance(spec, Unbounded):
        return spaces.Box(-np.inf, np.inf, tuple(spec.shape), dtype)
    raise TypeError(f"register_gym: no Gymnasium space for a {type(spec).__name__} spec.")


def _out(td: TensorDictBase, to_numpy: bool) -> dict[str, Any]:
    """A nested dict of the entries of ``td`` (numpy arrays with ``to_numpy``)."""
    out: dict[str, Any] = {}
    for key, value in td.items():
        if isinstance(value, TensorDictBase):
            out[key] = _out(value, to_numpy)
        else:
            out[key] = value.detach().cpu().numpy() if to_numpy else value
    return out


def _gym_env_class() -> type:
    gym = gymnasium_module()

    class TorchEnvAsGym(gym.Env):
        """A Gymnasium view of an rl_envs env (see :func:`register_gym`)."""

        def __init__(self, env: Any, info_keys: Sequence[Any], to_numpy: bool) -> None:
            if env.batch_size:
                raise ValueError(
                    f"register_gym: the env has batch_size {tuple(env.batch_size)}; only "
                    "unbatched envs (batch_size=()) become Gymnasium envs."
                )
            self.env = env
            self.info_keys = list(info_keys)
            self.to_numpy = to_numpy
            obs_spec = env.full_observation_spec.clone()
            for key in self.info_keys:
                del obs_spec[key]
            self.obs_keys = list(obs_spec.keys())
            self.observation_space = spec_to_space(obs_spec)
            action_spec = env.full_action_spec
            keys = env.action_keys
            self.action_space = spec_to_space(
                action_spec if len(keys) > 1 else action_spec[keys[0]]
            )
            self._root: TensorDictBase | None = None

        def _obs_info(self, td: TensorDictBase) -> tuple[dict[str, Any], dict[str, Any]]:
            obs = _out(td.select(*self.obs_keys), self.to_numpy)
            return obs, _out(td.select(*self.info_keys), self.to_numpy)

        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
            super().reset(seed=seed)
            if seed is not None:
                self.env.set_seed(seed)
            self._root = self.env.reset()
            return self._obs_info(self._root)

        def step(self, action: Any):
            td = self._root.clone(False)
            keys = self.env.action_keys
            if len(keys) == 1:
                action = {keys[0]: action}
            for key in keys:
                spec = self.env.full_action_spec[key]
                value = torch.as_tensor(np.asarray(action[key]), device=spec.device)
                td.set(key, value.to(spec.dtype).reshape(spec.shape))
            td = self.env.step(td)
            nxt = td.get("next")
            obs, info = self._obs_info(nxt)
            flags = [nxt.get(k) for k in ("reward", "terminated", "truncated")]
            if self.to_numpy:
                flags = [f.detach().cpu().numpy() for f in flags]
            reward, terminated, truncated = flags
            self._root = step_mdp(td, action_keys=keys, reward_keys=self.env.reward_keys)
            return obs, reward, terminated, truncated, info

        def close(self) -> None:
            self.env.close()

    return TorchEnvAsGym


def register_gym(
    id: str,
    entry_point: Callable[..., Any],
    *,
    transform: Any = None,
    info_keys: Sequence[Any] = (),
    to_numpy: bool = False,
    backend: str | None = None,
    **kwargs: Any,
) -> None:
    """Registers ``entry_point`` (an rl_envs env class or factory) with Gymnasium.

    ``gymnasium.make(id, **make_kwargs)`` then builds ``entry_point(**kwargs,
    **make_kwargs)``, wraps it in ``TransformedEnv(env, transform)`` when a transform is
    given, and returns its Gymnasium view. ``transform``, ``info_keys`` and
    ``to_numpy`` may also be passed to ``make``.

    Args:
        id: the Gymnasium id, e.g. ``"MyEnv-v0"``.
        entry_point: a callable returning an unbatched rl_envs env.
        transform: a transform to append (a fresh copy per ``make``).
        info_keys: observation entries returned in ``info`` instead.
        to_numpy: numpy arrays instead of tensors.
        backend: ``None`` or ``"gymnasium"`` (the only backend here).
        **kwargs: default keyword arguments of ``entry_point``.

    Example:
        >>> import gymnasium
        >>> from rl_envs import PendulumEnv
        >>> register_gym("RlEnvsPendulumDoc-v0", PendulumEnv, to_numpy=True)
        >>> env = gymnasium.make("RlEnvsPendulumDoc-v0")
        >>> obs, info = env.reset(seed=0)
        >>> obs["observation"].shape, env.action_space.shape
        ((3,), (1,))
    """
    if backend not in (None, "gymnasium"):
        raise ValueError(
            f"register_gym(backend={backend!r}): only Gymnasium is supported here; use "
            "backend='gymnasium' (or None)."
        )
    defaults = {"transform": transform, "info_keys": tuple(info_keys), "to_numpy": to_numpy}

    def make(**make_kwargs: Any) -> Any:
        options = {k: make_kwargs.pop(k, v) for k, v in defaults.items()}
        env = entry_point(**make_kwargs)
        if options["transform"] is not None:
            env = env.append_transform(options["transform"].clone())
        return _gym_env_class()(env, options["info_keys"], options["to_numpy"])

    gymnasium_module().register(id=id, entry_point=make, kwargs=kwargs, disable_env_checker=True)


EnvBase.gym_registrar = register_gym
