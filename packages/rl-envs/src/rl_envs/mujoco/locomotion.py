"""Gymnasium's MuJoCo v5 locomotion tasks, natively batched: HalfCheetah, Hopper, Walker2d, Ant.

The models are the MJCF files that ship inside the ``gymnasium`` package (extra
``rl-envs[mujoco]``), so the physics is the same. Observations, rewards and
termination follow Gymnasium's ``-v5`` definitions with their default arguments
(``tests/test_mujoco_native_locomotion.py`` compares them on the same states);
observations and rewards are cast to ``dtype`` (float32 by default) where Gymnasium
returns float64. The episode is truncated after ``max_episode_steps=1000``, as
``gymnasium.make`` does. The reset noise is drawn batch-wise from the env's own RNG,
so seeded episodes do not reproduce Gymnasium's seeded episodes one to one.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from rl_envs.mujoco.base import MujocoEnv

__all__ = ["AntEnv", "HalfCheetahEnv", "HopperEnv", "Walker2dEnv", "gymnasium_asset"]


def gymnasium_asset(name: str) -> Path:
    """The path of the MJCF file ``name`` shipped in ``gymnasium/envs/mujoco/assets``.

    Raises:
        ImportError: gymnasium is not installed (the message names the extra).

    Example:
        >>> gymnasium_asset("half_cheetah.xml").name
        'half_cheetah.xml'
    """
    spec = importlib.util.find_spec("gymnasium")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"The locomotion tasks load Gymnasium's MJCF model {name!r}, but gymnasium is not "
            "installed. Install the extra: pip install 'rl-envs[mujoco]', or pass model=<your "
            "MJCF>."
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "envs" / "mujoco" / "assets" / name


def _ctrl_cost(weight: float, action: np.ndarray) -> np.ndarray:
    return weight * np.square(action).sum(axis=1)


class HalfCheetahEnv(MujocoEnv):
    """``HalfCheetah-v5``: reward ``forward_reward_weight * x_velocity - ctrl_cost``.

    Observation ``[qpos[1:], qvel]`` (17); never terminates. Reset: ``qpos0 + U(-s, s)``,
    ``qvel = s * N(0, 1)`` with ``s = reset_noise_scale = 0.1``.

    Args:
        forward_reward_weight: weight of the forward velocity (1.0).
        ctrl_cost_weight: weight of ``sum(action**2)`` (0.1).
        **kwargs: :class:`MujocoEnv` arguments (``num_envs``, ``backend``, ``seed``, ...).

    Example:
        >>> env = HalfCheetahEnv(num_envs=8, seed=0)
        >>> env.rollout(5).batch_size
        torch.Size([8, 5])
    """

    FRAME_SKIP = 5
    RESET_NOISE_SCALE = 0.1
    SKIP_QPOS = 1

    def __init__(
        self, *, forward_reward_weight: float = 1.0, ctrl_cost_weight: float = 0.1, **kwargs: Any
    ) -> None:
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        super().__init__(kwargs.pop("model", None), **kwargs)

    def _model_source(self) -> Any:
        return gymnasium_asset("half_cheetah.xml")

    def _sample_initial_state(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        s = self.reset_noise_scale
        qpos = self.init_qpos + self.np_random.uniform(-s, s, size=(n, self.model.nq))
        qvel = self.init_qvel + s * self.np_random.standard_normal((n, self.model.nv))
        return qpos, qvel

    def _compute_reward(
        self, prev: dict[str, np.ndarray], action: np.ndarray, sim: dict[str, np.ndarray]
    ) -> np.ndarray:
        x_velocity = (sim["qpos"][:, 0] - prev["qpos"][:, 0]) / self.dt
        return self.forward_reward_weight * x_velocity - _ctrl_cost(self.ctrl_cost_weight, action)


class _Biped(MujocoEnv):
    """Shared by Hopper and Walker2d: forward + healthy reward - control cost.

    Observation ``[qpos[1:], clip(qvel, -10, 10)]``. Reset: ``U(-s, s)`` noise on both.
    """

    FRAME_SKIP = 4
    RESET_NOISE_SCALE = 5e-3
    SKIP_QPOS = 1
    HEALTHY_Z_RANGE: tuple[float, float] = (-np.inf, np.inf)
    HEALTHY_ANGLE_RANGE: tuple[float, float] = (-np.inf, np.inf)

    def __init__(
        self,
        *,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 1e-3,
        healthy_reward: float = 1.0,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] | None = None,
        healthy_angle_range: tuple[float, float] | None = None,
        **kwargs: Any,
    ) -> None:
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        self.healthy_reward = healthy_reward
        self.terminate_when_unhealthy = terminate_when_unhealthy
        self.healthy_z_range = healthy_z_range or self.HEALTHY_Z_RANGE
        self.healthy_angle_range = healthy_angle_range or self.HEALTHY_ANGLE_RANGE
        super().__init__(kwargs.pop("model", None), **kwargs)

    def _make_obs(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([sim["qpos"][:, 1:], np.clip(sim["qvel"], -10, 10)], axis=1)

    def _is_healthy(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        z, angle = sim["qpos"][:, 1], sim["qpos"][:, 2]
        (zlo, zhi), (alo, ahi) = self.healthy_z_range, self.healthy_angle_range
        return (zlo < z) & (z < zhi) & (alo < angle) & (angle < ahi)

    def _compute_reward(
        self, prev: dict[str, np.ndarray], action: np.ndarray, sim: dict[str, np.ndarray]
    ) -> np.ndarray:
        x_velocity = (sim["qpos"][:, 0] - prev["qpos"][:, 0]) / self.dt
        forward = self.forward_reward_weight * x_velocity
        healthy = self._is_healthy(sim) * self.healthy_reward
        return (forward + healthy) - _ctrl_cost(self.ctrl_cost_weight, action)

    def _compute_terminated(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        if not self.terminate_when_unhealthy:
            return np.zeros(self.num_envs, dtype=bool)
        return ~self._is_healthy(sim)


class HopperEnv(_Biped):
    """``Hopper-v5``: healthy while ``z > 0.7``, ``|angle| < 0.2`` and ``|state[2:]| < 100``.

    Observation (11) ``[qpos[1:], clip(qvel, -10, 10)]``; reward
    ``x_velocity + healthy_reward - 1e-3 * sum(action**2)``; terminates when unhealthy.

    Args:
        healthy_state_range: bounds of ``concat(qpos, qvel)[2:]`` ((-100, 100)).
        **kwargs: the reward weights of ``_Biped`` and :class:`MujocoEnv` arguments.

    Example:
        >>> env = HopperEnv(num_envs=4, seed=0)
        >>> env.observation_spec["observation"].shape
        torch.Size([4, 11])
    """

    HEALTHY_Z_RANGE = (0.7, float("inf"))
    HEALTHY_ANGLE_RANGE = (-0.2, 0.2)

    def __init__(
        self, *, healthy_state_range: tuple[float, float] = (-100.0, 100.0), **kwargs: Any
    ):
        self.healthy_state_range = healthy_state_range
        super().__init__(**kwargs)

    def _model_source(self) -> Any:
        return gymnasium_asset("hopper.xml")

    def _is_healthy(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        state = np.concatenate([sim["qpos"], sim["qvel"]], axis=1)[:, 2:]
        lo, hi = self.healthy_state_range
        ok_state = ((lo < state) & (state < hi)).all(axis=1)
        return ok_state & super()._is_healthy(sim)


class Walker2dEnv(_Biped):
    """``Walker2d-v5``: healthy while ``0.8 < z < 2`` and ``-1 < angle < 1``.

    Observation (17) ``[qpos[1:], clip(qvel, -10, 10)]``; model ``walker2d_v5.xml``.

    Example:
        >>> env = Walker2dEnv(num_envs=2, seed=0)
        >>> env.action_spec.shape
        torch.Size([2, 6])
    """

    HEALTHY_Z_RANGE = (0.8, 2.0)
    HEALTHY_ANGLE_RANGE = (-1.0, 1.0)

    def _model_source(self) -> Any:
        return gymnasium_asset("walker2d_v5.xml")


class AntEnv(MujocoEnv):
    """``Ant-v5``: forward + healthy reward - control cost - contact cost.

    Observation (105) ``[qpos[2:], qvel, clip(cfrc_ext[1:], -1, 1).flatten()]``; the
    forward velocity is that of the torso (``xpos`` of body 1); healthy while the state
    is finite and ``0.2 <= z <= 1``. Reset: ``qpos0 + U(-s, s)``, ``qvel = s * N(0, 1)``.

    Args:
        forward_reward_weight: 1.0. ctrl_cost_weight: 0.5. contact_cost_weight: 5e-4.
        healthy_reward: 1.0. terminate_when_unhealthy: True.
        healthy_z_range: (0.2, 1.0). contact_force_range: (-1.0, 1.0).
        main_body: the body whose x velocity is rewarded (1, the torso).
        include_cfrc_ext_in_observation: True.
        **kwargs: :class:`MujocoEnv` arguments.

    Example:
        >>> env = AntEnv(num_envs=2, seed=0)
        >>> env.observation_spec["observation"].shape
        torch.Size([2, 105])
    """

    FRAME_SKIP = 5
    RESET_NOISE_SCALE = 0.1
    SKIP_QPOS = 2
    SIM_FIELDS = ("qpos", "qvel", "xpos", "cfrc_ext")

    def __init__(
        self,
        *,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 0.5,
        contact_cost_weight: float = 5e-4,
        healthy_reward: float = 1.0,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (0.2, 1.0),
        contact_force_range: tuple[float, float] = (-1.0, 1.0),
        main_body: int = 1,
        include_cfrc_ext_in_observation: bool = True,
        **kwargs: Any,
    ) -> None:
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        self.contact_cost_weight = contact_cost_weight
        self.healthy_reward = healthy_reward
        self.terminate_when_unhealthy = terminate_when_unhealthy
        self.healthy_z_range = healthy_z_range
        self.contact_force_range = contact_force_range
        self.main_body = main_body
        self.include_cfrc_ext_in_observation = include_cfrc_ext_in_observation
        super().__init__(kwargs.pop("model", None), **kwargs)

    def _model_source(self) -> Any:
        return gymnasium_asset("ant.xml")

    _sample_initial_state = HalfCheetahEnv._sample_initial_state

    def _contact_forces(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        lo, hi = self.contact_force_range
        return np.clip(sim["cfrc_ext"], lo, hi)

    def _make_obs(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        parts = [sim["qpos"][:, 2:], sim["qvel"]]
        if self.include_cfrc_ext_in_observation:
            parts.append(self._contact_forces(sim)[:, 1:].reshape(self.num_envs, -1))
        return np.concatenate(parts, axis=1)

    def _is_healthy(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        finite = np.isfinite(sim["qpos"]).all(1) & np.isfinite(sim["qvel"]).all(1)
        z = sim["qpos"][:, 2]
        lo, hi = self.healthy_z_range
        return finite & (lo <= z) & (z <= hi)

    def _compute_reward(
        self, prev: dict[str, np.ndarray], action: np.ndarray, sim: dict[str, np.ndarray]
    ) -> np.ndarray:
        body = self.main_body
        x_velocity = (sim["xpos"][:, body, 0] - prev["xpos"][:, body, 0]) / self.dt
        forward = x_velocity * self.forward_reward_weight
        healthy = self._is_healthy(sim) * self.healthy_reward
        contact = self.contact_cost_weight * np.square(self._contact_forces(sim)).sum(axis=(1, 2))
        return (forward + healthy) - (_ctrl_cost(self.ctrl_cost_weight, action) + contact)

    def _compute_terminated(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        if not self.terminate_when_unhealthy:
            return np.zeros(self.num_envs, dtype=bool)
        return ~self._is_healthy(sim)
