"""``GymWrapper`` / ``GymEnv``: Gymnasium envs (single or vectorized) as ``EnvBase``.

* Spaces map to specs as described in ``rl_envs.libs._gym_spaces``; a Discrete
  action is one-hot (int64) unless ``categorical_action_encoding=True``.
* ``("next", "terminated")`` and ``("next", "truncated")`` are Gymnasium's flags,
  ``done = terminated | truncated``; ``("next", obs)`` is the true last observation.
* ``info_keys``: entries of Gymnasium's ``info`` dict exposed as observation keys
  (spec inferred from one reset and one step at construction; zeros when absent).
* ``from_pixels``: ``"pixels"`` (uint8 ``[H, W, 3]``) from ``env.render()``; the env
  must be made with ``render_mode="rgb_array"`` (``GymEnv`` does it). With
  ``pixels_only=True`` (default) the state observations are dropped.
* ``frame_skip``: each action is repeated ``frame_skip`` times (rewards summed,
  stopping at the first done).
* Seeding: ``set_seed(s)`` calls ``env.reset(seed=s)`` and seeds the action space.
* A ``gymnasium.vector.VectorEnv`` becomes a batched env, ``batch_size=[num_envs]``.
  Partial resets (``"_reset"``) are exact for each autoreset mode:

  - ``DISABLED`` and ``NEXT_STEP``: the done entries are reset explicitly through
    ``env.reset(options={"reset_mask": mask})``, which also cancels Gymnasium's
    pending next-step autoreset, so no step is wasted on a reset and no
    transition is invented;
  - ``SAME_STEP``: Gymnasium resets done entries inside ``step``; ``("next", obs)``
    takes the true final observation from ``info["final_obs"]`` and the reset
    observation is kept until ``"_reset"`` asks for it (no call to Gymnasium).

  ``GymEnv(name, num_envs=N)`` builds its vector env in ``DISABLED`` mode.
* ``rollout`` of a single (non-vector) env has the ``"gym"`` rollout backend
  (``_gym_fast``): numpy storage preallocated once, no TensorDict per step.
* ``env.binding`` (:class:`~rl_envs.libs.gym_binding.GymBinding`): the observation
  readers, action leaves and action conversion that ``_step``, the ``"gym"`` backend and
  the batched envs' numpy stepper share.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs.batched.parallel import ParallelEnv
from rl_envs.env_base import EnvBase
from rl_envs.libs import _gym_fast, _state
from rl_envs.libs import _gym_spaces as gs
from rl_envs.libs._gym_spaces import register_gym_spec_conversion
from rl_envs.libs.backend import gym_backend, set_gym_backend  # TorchRL exposes them here too
from rl_envs.libs.gym_binding import GymBinding, ObsReader
from rl_envs.rollout_backend import RolloutBackend
from rl_envs.specs import Bounded, Categorical, Unbounded

__all__ = [
    "GymBinding",
    "GymEnv",
    "GymWrapper",
    "gym_backend",
    "register_gym_spec_conversion",
    "set_gym_backend",
]

_INSTALL = (
    "Gymnasium is not installed: install the extra with `pip install 'rl-envs[gym]'` "
    "(MuJoCo tasks: 'rl-envs[mujoco]'; pixels of classic-control tasks: 'rl-envs[pixels]')."
)


def _import_gym() -> Any:
    try:
        import gymnasium
    except ImportError as err:
        raise ImportError(_INSTALL) from err
    return gymnasium


def _info_spec(value: Any, device: torch.device) -> tuple[Any, np.dtype]:
    arr = np.asarray(value)
    if arr.dtype == np.bool_:
        return Categorical(2, shape=arr.shape, dtype=torch.bool, device=device), arr.dtype
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    dtype = torch.from_numpy(np.zeros((), dtype=arr.dtype)).dtype
    return Unbounded(shape=arr.shape, dtype=dtype, device=device), arr.dtype


class GymWrapper(EnvBase):
    """Wraps a Gymnasium env (``gymnasium.Env`` or ``gymnasium.vector.VectorEnv``).

    Args:
        env: the Gymnasium env.
        categorical_action_encoding: Discrete actions as indices (``Categorical``)
            instead of one-hot (``OneHot``, TorchRL's default).
        from_pixels: add ``"pixels"`` rendered with ``env.render()`` (rgb_array).
        pixels_only: with ``from_pixels``, drop the state observations.
        frame_skip: repeat each action this many times.
        info_keys: ``info`` entries to expose as observation keys.
        device: device of the output tensors.
        validate_actions: see :class:`~rl_envs.EnvBase`.

    Example:
        >>> import gymnasium as gym
        >>> env = GymWrapper(gym.make("CartPole-v1"))
        >>> env.rollout(5, break_when_any_done=False).batch_size
        torch.Size([5])
    """

    # Set on exactly this class and GymEnv (not inherited: a subclass may override _step):
    # batched envs step these workers through the Gymnasium binding directly.
    fast_batched_step: ClassVar[bool] = True

    def __init__(
        self,
        env: Any,
        categorical_action_encoding: bool = False,
        *,
        from_pixels: bool = False,
        pixels_only: bool = True,
        frame_skip: int = 1,
        info_keys: Sequence[str] | None = None,
        device: torch.device | str | None = None,
        validate_actions: bool = False,
    ) -> None:
        gym = _import_gym()
        self._is_vector = isinstance(env, gym.vector.VectorEnv)
        batch = (int(env.num_envs),) if self._is_vector else ()
        super().__init__(device=device, batch_size=batch, validate_actions=validate_actions)
        if frame_skip < 1:
            raise ValueError(f"frame_skip must be >= 1, got {frame_skip}.")
        if self._is_vector and (from_pixels or frame_skip != 1):
            raise ValueError(
                "from_pixels and frame_skip are not supported for Gymnasium vector envs; "
                "use ParallelEnv / SerialEnv of GymEnv(..., from_pixels=True, frame_skip=k)."
            )
        self._env = env
        self.categorical_action_encoding = categorical_action_encoding
        self.from_pixels = from_pixels
        self.pixels_only = pixels_only
        self.frame_skip = frame_skip
        self.info_keys = tuple(info_keys or ())
        self._autoreset_mode = None
        if self._is_vector:
            mode = env.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
            self._autoreset_mode = gym.vector.AutoresetMode(mode)
        self._last_obs: Any = None
        self._pending = np.zeros(batch, dtype=bool)
        self._build_specs()

    # ------------------------------------------------------------------ specs
    @property
    def env(self) -> Any:
        """The wrapped Gymnasium env."""
        return self._env

    @property
    def autoreset_mode(self) -> Any:
        """Gymnasium's autoreset mode of a vector env (``None`` for a single env)."""
        return self._autoreset_mode

    def _single_spaces(self) -> tuple[Any, Any]:
        env = self._env
        if self._is_vector:
            return env.single_observation_space, env.single_action_space
        return env.observation_space, env.action_space

    def _build_specs(self) -> None:
        d = self.device
        obs_space, act_space = self._single_spaces()
        cat = self.categorical_action_encoding
        act_leaves = gs.flatten_space(act_space, "action", action=True, categorical=cat, device=d)
        obs_leaves = gs.flatten_space(
            obs_space, "observation", action=False, categorical=cat, device=d
        )
        readers: list[ObsReader] = []
        if not (self.from_pixels and self.pixels_only):
            for leaf in obs_leaves:
                get = gs.getter(leaf.path)
                offset = gs.obs_offset(leaf.space)
                readers.append(ObsReader(leaf.key, lambda o, i, g=get: g(o), leaf.np_dtype, offset))
        obs_spec = gs.leaves_to_composite(
            obs_leaves if not (self.from_pixels and self.pixels_only) else [], d
        )
        if self.from_pixels or self.info_keys:
            _, info = self._env.reset()
            if self.from_pixels:
                frame = self._render()
                obs_spec["pixels"] = Bounded(
                    low=0, high=255, shape=frame.shape, dtype=torch.uint8, device=d
                )
                readers.append(ObsReader(("pixels",), lambda o, i: self._render(), np.uint8, 0))
            if self.info_keys:
                sample = self._sample_action()
                _, _, _, _, step_info = self._env.step(sample)
                for k in self.info_keys:
                    value = step_info.get(k, info.get(k))
                    if value is None:
                        raise KeyError(
                            f"info_keys: {k!r} is not in the env's info dict (got "
                            f"{sorted(step_info)}). Pick keys that the env's step() returns."
                        )
                    if self._is_vector:
                        value = np.asarray(value)[0]
                    spec, dt = _info_spec(value, d)
                    obs_spec[k] = spec
                    zero = np.zeros(spec.shape[len(self.batch_size) :], dtype=dt)
                    if self._is_vector:
                        zero = np.zeros((*self.batch_size, *zero.shape), dtype=dt)
                    readers.append(ObsReader((k,), lambda o, i, k=k, z=zero: i.get(k, z), dt, 0))
            self._env.reset()
        self.binding = GymBinding(
            self._env,
            readers,
            act_leaves,
            categorical=cat,
            frame_skip=self.frame_skip,
            is_vector=self._is_vector,
        )
        self.observation_spec = obs_spec
        self.action_spec = gs.leaves_to_composite(act_leaves, d)
        # batch dims written out: with num_envs=1, a bare (1,) would read as the batch alone
        self.reward_spec = Unbounded(shape=(*self.batch_size, 1), dtype=torch.float32, device=d)

    def _render(self) -> np.ndarray:
        frame = self._env.render()
        if frame is None:
            raise RuntimeError(
                "from_pixels=True but env.render() returned None: make the env with "
                "render_mode='rgb_array', e.g. gym.make(name, render_mode='rgb_array')."
            )
        return np.asarray(frame)

    def _sample_action(self) -> Any:
        return self._env.action_space.sample()

    # --------------------------------------------------------------- reading
    def _to_td(self, entries: dict[Any, torch.Tensor]) -> TensorDict:
        b = self.batch_size
        source: dict[str, Any] = {}
        for key, value in entries.items():
            if b and tuple(value.shape[: len(b)]) != tuple(b):
                raise RuntimeError(
                    f"{type(self).__name__}: the entry {key!r} read from the gym env has shape "
                    f"{tuple(value.shape)}, expected leading dims {tuple(b)} (the env's "
                    "batch_size). Check the env's observation space against what it returns."
                )
            path = (key,) if isinstance(key, str) else key
            node = source
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = value
        # The entries are fresh tensors of the spec's batch dims (checked above): the
        # unvalidated constructor skips tensordict's per-key checks on the hot path.
        td = TensorDict._new_unsafe(source, batch_size=b)
        if self.device.type != "cpu":
            td = td.to(self.device)
        return td

    # ------------------------------------------------------------------ hooks
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        binding = self.binding
        action = binding.to_gym(tensordict)
        if (
            type(action) is np.ndarray
            and action.dtype.kind == "f"
            and not np.isfinite(action).all()
        ):
            raise ValueError(
                f"{type(self).__name__}: expected a finite action for {self._action_space()}, "
                f"got NaN or inf: {action.reshape(-1)[:6].tolist()}. The env was not stepped. "
                "Check the policy's output (e.g. a diverged network)."
            )
        try:
            obs, reward, term, trunc, info = binding.step(action)
        except AssertionError as exc:  # Gymnasium envs check their action with asserts
            raise ValueError(
                f"{type(self).__name__}: the Gymnasium env rejected the action {action!r} "
                f"({exc}); expected a member of its action space {self._action_space()}. "
                "Draw actions from env.action_spec (or env.rand_action()); a categorical "
                "spec takes indices in [0, n)."
            ) from exc
        except Exception as exc:
            if hasattr(exc, "add_note"):  # Python >= 3.11: say where it came from
                exc.add_note(f"(raised by the Gymnasium env's step() inside {self!r})")
            raise
        b = self.batch_size
        term = np.asarray(term, dtype=bool).reshape(*b, 1)
        trunc = np.asarray(trunc, dtype=bool).reshape(*b, 1)
        entries = binding.read(obs, info)
        if self._is_vector:
            self._last_obs, self._last_info = obs, info
            done = (term | trunc).reshape(b)
            if self._autoreset_mode == _import_gym().vector.AutoresetMode.SAME_STEP and done.any():
                entries = self._final_entries(entries, info, done)
                self._pending = self._pending | done
        entries["reward"] = torch.from_numpy(np.asarray(reward, dtype=np.float32).reshape(*b, 1))
        entries["terminated"] = torch.from_numpy(term)
        entries["truncated"] = torch.from_numpy(trunc)
        entries["done"] = torch.from_numpy(term | trunc)
        return self._to_td(entries)

    def _action_space(self) -> Any:
        space = getattr(self._env, "single_action_space", None)
        return self._env.action_space if space is None else space

    def _final_entries(
        self, entries: dict[Any, torch.Tensor], info: dict[str, Any], done: np.ndarray
    ) -> dict[Any, torch.Tensor]:
        """SAME_STEP: replaces the (already reset) observations of done entries by the final ones."""
        final_obs = info["final_obs"]
        final_info = info.get("final_info", {})
        for i in np.flatnonzero(done):
            for key, read, dtype, offset in self.binding.readers:
                fi = {k: np.asarray(v)[i] for k, v in final_info.items() if not k.startswith("_")}
                value = np.array(read(final_obs[i], fi), dtype=dtype)
                if key[0] in self.info_keys:
                    value = np.array(fi.get(key[0], np.zeros_like(value)), dtype=dtype)
                if offset:
                    value -= offset
                entries[key][i] = torch.from_numpy(value)
        return entries

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if not self._is_vector or mask is None:
            obs, info = self._env.reset(**kwargs)
            self._pending = np.zeros(self.batch_size, dtype=bool)
        else:
            m = mask.reshape(self.batch_size).cpu().numpy().astype(bool)
            todo = m & ~self._pending
            if todo.any():
                obs, info = self._env.reset(options={"reset_mask": todo, **kwargs})
            else:
                obs, info = self._last_obs, {}
            self._pending = self._pending & ~m
        if self._is_vector:
            self._last_obs, self._last_info = obs, info
        return self._to_td(self.binding.read(obs, info))

    def _set_seed(self, seed: int | None) -> None:
        self._env.reset(seed=seed)
        self._pending = np.zeros(self.batch_size, dtype=bool)
        self._env.action_space.seed(seed)

    @staticmethod
    def get_library_name(env: Any) -> str:
        """The library ``env`` comes from (``"gymnasium"`` here), as TorchRL reports it.

        Example:
            >>> import gymnasium
            >>> GymWrapper.get_library_name(gymnasium.make("CartPole-v1"))
            'gymnasium'
        """
        return type(env.unwrapped if hasattr(env, "unwrapped") else env).__module__.split(".")[0]

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Closes the Gymnasium env (``raise_if_closed``: TorchRL's keyword; closing twice is
        silent)."""
        self.is_closed = True
        self._env.close()

    def __repr__(self) -> str:
        spec = getattr(self._env, "spec", None)
        name = getattr(spec, "id", type(self._env).__name__)
        return f"{type(self).__name__}(env={name}, batch_size={tuple(self.batch_size)}, device={self.device})"

    # ----------------------------------------------------------------- state
    def _base_vector_env(self) -> Any:
        gym = _import_gym()
        layers = _chain(self._env)
        base = layers[-1]
        if not isinstance(base, gym.vector.SyncVectorEnv):
            kind = type(base).__name__
            why = (
                "its sub-envs live in worker processes"
                if isinstance(base, gym.vector.AsyncVectorEnv)
                else "only gymnasium.vector.SyncVectorEnv exposes its sub-envs"
            )
            raise NotImplementedError(
                f"{type(self).__name__}.get_state()/set_state(): unsupported for a {kind} "
                f"({why}). Use GymEnv(name, num_envs=N) with vectorization_mode='sync', or "
                "a SerialEnv of single GymEnv's."
            )
        return base

    def get_state(self) -> dict[str, Any]:
        """The exact state of the wrapped Gymnasium env and of this wrapper (picklable).

        For every layer of the wrapper chain (each wrapper and ``unwrapped``; for a
        ``SyncVectorEnv``, its own autoreset bookkeeping and each sub-env's chain)
        the instance attributes holding episode state are captured: numbers and
        flags, numpy arrays (copied), ``numpy.random.Generator`` states and
        MuJoCo's ``MjData`` (see ``rl_envs.libs._state``); the wrapper's own
        per-episode state (``SAME_STEP``'s held reset observations) too. Spaces,
        specs, models and renderers are not. ``AsyncVectorEnv`` is unsupported.

        Example:
            >>> env = GymEnv("CartPole-v1")
            >>> _ = env.reset()
            >>> state = env.get_state()
            >>> a = env.rand_step(env.reset())
            >>> env.set_state(state)  # back to the moment of get_state()
        """
        sub = None
        last_obs = _state.capture(self._last_obs)  # None, an array or a dict of arrays
        if last_obs is _state.SKIP:
            last_obs = None
        if self._is_vector:
            sub = [_capture_chain(e) for e in self._base_vector_env().envs]
        return {
            "env_class": type(self).__name__,
            "layers": _capture_chain(self._env),
            "sub_envs": sub,
            "wrapper": {"pending": self._pending.copy(), "last_obs": last_obs},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`get_state` result into this env (e.g. a fresh instance of
        the same env): the following steps are bit-identical to those that followed
        ``get_state()``. Raises ``ValueError`` if the wrapper chains differ."""
        _restore_chain(self._env, state["layers"], "env")
        if self._is_vector:
            envs = self._base_vector_env().envs
            if len(envs) != len(state["sub_envs"]):
                raise ValueError(
                    f"set_state(): the state holds {len(state['sub_envs'])} sub-envs, this "
                    f"vector env has {len(envs)}. Restore into an env built the same way."
                )
            for i, (e, saved) in enumerate(zip(envs, state["sub_envs"], strict=True)):
                _restore_chain(e, saved, f"sub-env {i}")
        wrapper = state["wrapper"]
        self._pending = wrapper["pending"].copy()
        self._last_obs = copy.deepcopy(wrapper["last_obs"])


def _chain(env: Any) -> list[Any]:
    """The layers of a Gymnasium wrapper chain: each wrapper, then the unwrapped env."""
    layers = [env]
    while "env" in vars(layers[-1]) and all(vars(layers[-1])["env"] is not x for x in layers):
        layers.append(vars(layers[-1])["env"])
    return layers


def _capture_chain(env: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(type(layer).__name__, _state.capture_object(layer)) for layer in _chain(env)]


def _restore_chain(env: Any, saved: list[tuple[str, dict[str, Any]]], where: str) -> None:
    layers = _chain(env)
    names = [type(layer).__name__ for layer in layers]
    expected = [name for name, _ in saved]
    if names != expected:
        raise ValueError(
            f"set_state(): the {where}'s wrapper chain is {names} but the state was taken "
            f"from {expected}. Restore into an env built the same way (same id and kwargs)."
        )
    for layer, (_, attrs) in zip(layers, saved, strict=True):
        _state.restore_object(layer, attrs)


class GymEnv(GymWrapper):
    """Builds a Gymnasium env by name and wraps it (``gymnasium.make`` / ``make_vec``).

    Args:
        env_name: a registered id, e.g. ``"CartPole-v1"``, ``"HalfCheetah-v5"``.
        num_envs: if > 0, a ``gymnasium.make_vec`` vector env (``vectorization_mode``
            ``"sync"`` by default) in ``DISABLED`` autoreset mode, batch_size ``[num_envs]``.
        vectorization_mode: ``"sync"`` or ``"async"`` for ``num_envs > 0``.
        categorical_action_encoding, from_pixels, pixels_only, frame_skip, info_keys,
        device, validate_actions: see :class:`GymWrapper`.
        num_workers: if > 1, the constructor returns a :class:`~rl_envs.ParallelEnv` of
            ``num_workers`` processes, each building ``GymEnv(env_name, ...)`` with the
            other arguments (TorchRL's keyword; ``num_envs`` vectorises inside Gymnasium
            instead, and both together give ``num_workers * num_envs`` envs).
        **kwargs: passed to ``gymnasium.make`` (e.g. ``max_episode_steps``).

    Example:
        >>> env = GymEnv("Pendulum-v1")
        >>> env.set_seed(0)
        1
        >>> env.rollout(3)["next", "reward"].shape
        torch.Size([3, 1])
    """

    fast_batched_step: ClassVar[bool] = True  # see GymWrapper

    def __new__(cls, *args: Any, num_workers: int = 1, **kwargs: Any) -> Any:
        """``GymEnv(..., num_workers=n)`` with ``n > 1`` returns a ``ParallelEnv`` of them.

        Python calls ``__init__`` only on an instance of ``cls``: the ParallelEnv built
        here is returned as it is.
        """
        if cls is GymEnv and num_workers > 1:
            make_env = functools.partial(GymEnv, *args, **kwargs)
            return ParallelEnv(num_workers, make_env)
        return super().__new__(cls, *args, **kwargs)

    def __init__(
        self,
        env_name: str,
        num_envs: int = 0,
        categorical_action_encoding: bool = False,
        *,
        num_workers: int = 1,
        vectorization_mode: str = "sync",
        from_pixels: bool = False,
        pixels_only: bool = True,
        frame_skip: int = 1,
        info_keys: Sequence[str] | None = None,
        device: torch.device | str | None = None,
        validate_actions: bool = False,
        **kwargs: Any,
    ) -> None:
        del num_workers  # 1 here: more is handled by __new__
        gym = _import_gym()
        if from_pixels:
            kwargs.setdefault("render_mode", "rgb_array")
        try:
            if num_envs > 0:
                env = gym.make_vec(
                    env_name,
                    num_envs=num_envs,
                    vectorization_mode=vectorization_mode,
                    vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED},
                    **kwargs,
                )
            else:
                env = gym.make(env_name, **kwargs)
        except gym.error.DependencyNotInstalled as err:
            raise ImportError(
                f"GymEnv({env_name!r}) needs more dependencies: {err}. For MuJoCo tasks "
                "install 'rl-envs[mujoco]'; for pixels of classic-control tasks 'rl-envs[pixels]'."
            ) from err
        self.env_name = env_name
        super().__init__(
            env,
            categorical_action_encoding,
            from_pixels=from_pixels,
            pixels_only=pixels_only,
            frame_skip=frame_skip,
            info_keys=info_keys,
            device=device,
            validate_actions=validate_actions,
        )


def _backend_supports(env: Any, root: TensorDictBase, policy: Any, mode: str) -> bool:
    # exact types: a subclass overriding _step / _reset gets the generic loop, which calls them
    if type(env) not in (GymWrapper, GymEnv) or env.binding.is_vector or mode == "all":
        return False
    return _gym_fast.supports(env, env.binding, root, policy)


def _backend_run(
    env: GymWrapper,
    root: TensorDictBase,
    max_steps: int,
    policy: Any,
    mode: str,
    actions: dict[Any, torch.Tensor] | None,
) -> TensorDictBase:
    """Numpy storage preallocated once, no TensorDict per step (see ``_gym_fast``)."""
    return _gym_fast.run(env, env.binding, root, max_steps, policy, mode, actions)


GymWrapper.rollout_backends = (RolloutBackend("gym", _backend_supports, _backend_run),)
