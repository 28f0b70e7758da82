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
from rl_envs.specs import Bounded, Composite, Unbounded

__all__ = ["DMControlEnv", "DMControlWrapper"]

_INSTALL = (
    "dm-control is not installed: install the extra with `pip install 'rl-envs[dm-control]'`."
)


def _torch_dtype(np_dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.zeros((), dtype=np_dtype)).dtype


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
        validate_actions: bool = True,
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

    def close(self) -> None:
        """Closes the dm-control env."""
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
        validate_actions: bool = True,
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
