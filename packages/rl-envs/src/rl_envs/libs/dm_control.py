"""``DMControlWrapper`` / ``DMControlEnv``: dm-control suite tasks as ``EnvBase``.

* Every entry of the task's observation dict is an observation key at the root
  (``"position"``, ``"velocity"``, ...); scalar entries get shape ``(1,)``.
* The action is ``Bounded`` from the task's ``BoundedArray`` (float64, as dm-control).
* ``terminated`` is ``timestep.last() and discount == 0`` (the task ended);
  ``truncated`` is ``timestep.last() and discount > 0`` (the time limit).
* ``from_pixels``: ``"pixels"`` (uint8 ``[H, W, 3]``) from
  ``physics.render(**render_kwargs)``. Headless machines need an OpenGL backend:
  set ``MUJOCO_GL=egl`` (or ``osmesa``) before importing dm-control.
* Seeding: ``set_seed(s)`` reseeds the task's ``numpy.random.RandomState``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs.env_base import EnvBase
from rl_envs.libs import _state
from rl_envs.specs import Bounded, Composite, Unbounded

__all__ = ["DMControlEnv", "DMControlWrapper"]

_INSTALL = (
    "dm-control is not installed: install the extra with `pip install 'rl-envs[dm-control]'`."
)


def _torch_dtype(np_dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.zeros((), dtype=np_dtype)).dtype


_MODEL_SKIP = ("tex_", "mesh_", "skin_", "flex_")  # rendering / geometry data, never changed


def _model_arrays(model: Any, copy: bool) -> dict[str, np.ndarray]:
    """The model's numeric parameter arrays (tasks may change them per episode, e.g.
    finger-spin's hinge damping), without textures and mesh data."""
    out = {}
    for name in dir(model):
        if name.startswith("_") or name.startswith(_MODEL_SKIP):
            continue
        value = getattr(model, name)
        if isinstance(value, np.ndarray) and value.dtype != object:
            out[name] = value.copy() if copy else value
    return out


class DMControlWrapper(EnvBase):
    """Wraps a dm-control environment (``dm_control.rl.control.Environment``).

    Args:
        env: the dm-control env, e.g. ``suite.load("cheetah", "run")``.
        from_pixels: add ``"pixels"`` rendered by the physics.
        pixels_only: with ``from_pixels``, drop the state observations.
        frame_skip: repeat each action this many times (rewards summed).
        render_kwargs: passed to ``physics.render`` (default height 240, width 320,
            camera_id 0).
        device: device of the output tensors.
        validate_actions: see :class:`~rl_envs.EnvBase`.

    Example:
        >>> from dm_control import suite
        >>> env = DMControlWrapper(suite.load("cheetah", "run"))
        >>> env.rollout(3)["next", "position"].shape
        torch.Size([3, 8])
    """

    def __init__(
        self,
        env: Any,
        *,
        from_pixels: bool = False,
        pixels_only: bool = True,
        frame_skip: int = 1,
        render_kwargs: dict[str, Any] | None = None,
        device: torch.device | str | None = None,
        validate_actions: bool = False,
    ) -> None:
        super().__init__(device=device, validate_actions=validate_actions)
        if frame_skip < 1:
            raise ValueError(f"frame_skip must be >= 1, got {frame_skip}.")
        self._env = env
        self.from_pixels = from_pixels
        self.pixels_only = pixels_only
        self.frame_skip = frame_skip
        self.render_kwargs = {"height": 240, "width": 320, "camera_id": 0, **(render_kwargs or {})}
        d = self.device
        obs = Composite(shape=(), device=d)
        self._obs_keys: list[tuple[str, tuple[int, ...], np.dtype]] = []
        if not (from_pixels and pixels_only):
            for name, spec in env.observation_spec().items():
                shape = tuple(spec.shape) or (1,)
                obs[name] = Unbounded(shape=shape, dtype=_torch_dtype(spec.dtype), device=d)
                self._obs_keys.append((name, shape, np.dtype(spec.dtype)))
        if from_pixels:
            h, w = self.render_kwargs["height"], self.render_kwargs["width"]
            obs["pixels"] = Bounded(low=0, high=255, shape=(h, w, 3), dtype=torch.uint8, device=d)
        self.observation_spec = obs
        act = env.action_spec()
        dtype = _torch_dtype(act.dtype)
        self.action_spec = Bounded(
            low=torch.tensor(np.broadcast_to(act.minimum, act.shape), dtype=dtype),
            high=torch.tensor(np.broadcast_to(act.maximum, act.shape), dtype=dtype),
            shape=act.shape,
            dtype=dtype,
            device=d,
        )
        self._act_dtype = np.dtype(act.dtype)
        self.reward_spec = Unbounded(shape=(1,), dtype=torch.float32, device=d)

    @property
    def env(self) -> Any:
        """The wrapped dm-control env."""
        return self._env

    def _read(self, observation: OrderedDict) -> dict[str, torch.Tensor]:
        out = {}
        for name, shape, dtype in self._obs_keys:
            out[name] = torch.from_numpy(np.array(observation[name], dtype=dtype).reshape(shape))
        if self.from_pixels:
            frame = self._env.physics.render(**self.render_kwargs)
            out["pixels"] = torch.from_numpy(np.array(frame, dtype=np.uint8))
        return out

    def _to_td(self, entries: dict[str, torch.Tensor]) -> TensorDict:
        return TensorDict(entries, batch_size=self.batch_size, device=self.device)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        timestep = self._env.reset()
        return self._to_td(self._read(timestep.observation))

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get("action").cpu().numpy().astype(self._act_dtype, copy=False)
        reward = 0.0
        for _ in range(self.frame_skip):
            timestep = self._env.step(action)
            reward += float(timestep.reward or 0.0)
            if timestep.last():
                break
        last = timestep.last()
        discount = 1.0 if timestep.discount is None else float(timestep.discount)
        terminated = torch.tensor([last and discount == 0.0])
        truncated = torch.tensor([last and discount != 0.0])
        entries: dict[str, torch.Tensor] = self._read(timestep.observation)
        entries["reward"] = torch.tensor([reward], dtype=torch.float32)
        entries["terminated"] = terminated
        entries["truncated"] = truncated
        entries["done"] = terminated | truncated
        return self._to_td(entries)

    def _set_seed(self, seed: int | None) -> None:
        self._env.task.random.seed(seed)

    def get_state(self) -> dict[str, Any]:
        """The exact state (picklable): the physics' integration state (qpos, qvel,
        act, ctrl, warmstart, ...; restored with ``mj_setState`` then ``mj_step1``, as
        dm-control's step leaves the data), the model's numeric parameters (tasks
        change some per episode, e.g. reacher's target), the task's random state and
        attributes, and the environment's step counters. The model's option structs
        (``opt``: timestep, gravity, ...) are not captured. See :meth:`EnvBase.get_state`.

        Example:
            >>> env = DMControlEnv("cheetah", "run")
            >>> _ = env.reset()
            >>> fresh = DMControlEnv("cheetah", "run")
            >>> fresh.set_state(env.get_state())  # steps like env from here
        """
        import mujoco

        env = self._env
        physics = env.physics
        if getattr(physics, "legacy_step", True):
            # dm-control's step ends with mj_step1: the data is a function of the
            # integration state (qpos, qvel, act, ctrl, warmstart, ...), ~100 floats.
            model, data = physics.model.ptr, physics.data.ptr
            spec = mujoco.mjtState.mjSTATE_INTEGRATION
            flat = np.empty(mujoco.mj_stateSize(model, spec), dtype=np.float64)
            mujoco.mj_getState(model, data, flat, spec)
            physics_state: Any = flat
        else:
            physics_state = _state.capture(physics.data.ptr)  # the whole MjData
        return {
            "env_class": type(self).__name__,
            "environment": _state.capture_object(env),
            "task": _state.capture_object(env.task),
            "physics": physics_state,
            "model": _model_arrays(physics.model.ptr, copy=True),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`get_state` result (into an env of the same task)."""
        import mujoco

        env = self._env
        physics = env.physics
        model, data = physics.model.ptr, physics.data.ptr
        saved = state["physics"]
        if isinstance(saved, np.ndarray):
            size = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_INTEGRATION)
            if saved.shape != (size,):
                raise ValueError(
                    f"DMControlWrapper.set_state(): the state's physics has {saved.shape[0]} "
                    f"integration values, this env's has {size}. Restore into an env of the "
                    "same domain and task."
                )
        elif saved.qpos.shape != data.qpos.shape:
            raise ValueError(
                f"DMControlWrapper.set_state(): the state's physics has nq={saved.qpos.shape[0]}, "
                f"this env's has nq={data.qpos.shape[0]}. Restore into an env of the same "
                "domain and task."
            )
        _state.restore_object(env, state["environment"])
        _state.restore_object(env.task, state["task"])
        current = _model_arrays(model, copy=False)
        for name, value in state["model"].items():
            current[name][...] = value
        if isinstance(saved, np.ndarray):
            mujoco.mj_setState(model, data, saved, mujoco.mjtState.mjSTATE_INTEGRATION)
            mujoco.mj_step1(model, data)  # as dm-control's step leaves the data
        else:
            mujoco.mj_copyData(data, model, saved)

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Closes the dm-control env (``raise_if_closed``: TorchRL's keyword; closing twice is
        silent)."""
        self.is_closed = True
        self._env.close()


class DMControlEnv(DMControlWrapper):
    """Loads a dm-control suite task by name and wraps it.

    Args:
        env_name: the domain, e.g. ``"cheetah"``.
        task_name: the task, e.g. ``"run"``.
        from_pixels, pixels_only, frame_skip, render_kwargs, device,
        validate_actions: see :class:`DMControlWrapper`.
        **kwargs: passed to ``suite.load`` (e.g. ``task_kwargs``).

    Example:
        >>> env = DMControlEnv("cheetah", "run")
        >>> env.set_seed(0)
        1
        >>> env.rollout(3).batch_size
        torch.Size([3])
    """

    def __init__(
        self,
        env_name: str,
        task_name: str,
        *,
        from_pixels: bool = False,
        pixels_only: bool = True,
        frame_skip: int = 1,
        render_kwargs: dict[str, Any] | None = None,
        device: torch.device | str | None = None,
        validate_actions: bool = False,
        **kwargs: Any,
    ) -> None:
        try:
            from dm_control import suite
        except ImportError as err:
            raise ImportError(_INSTALL) from err
        self.env_name, self.task_name = env_name, task_name
        super().__init__(
            suite.load(env_name, task_name, **kwargs),
            from_pixels=from_pixels,
            pixels_only=pixels_only,
            frame_skip=frame_skip,
            render_kwargs=render_kwargs,
            device=device,
            validate_actions=validate_actions,
        )
