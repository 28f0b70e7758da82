"""``SatelliteEnv``: attitude control of a free-floating satellite with three reaction wheels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rl_envs.mujoco._quat import quat_angle, quat_conj, quat_mul, random_quat
from rl_envs.mujoco.base import MujocoEnv

__all__ = ["SatelliteEnv"]

ASSET = Path(__file__).parent / "assets" / "satellite.xml"


def _axis_angle_quat(rng: np.random.Generator, n: int, max_angle: float) -> np.ndarray:
    axis = rng.standard_normal((n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    angle = rng.uniform(0.0, max_angle, size=(n, 1))
    return np.concatenate([np.cos(angle / 2), np.sin(angle / 2) * axis], axis=1)


class SatelliteEnv(MujocoEnv):
    """Point a satellite at a target attitude with three orthogonal reaction wheels.

    The model (``assets/satellite.xml``) is a 21 kg bus with two solar panels and three
    wheels on x, y, z (motors of 0.1 N m at ``|action| = 1``), in zero gravity; the only
    way to turn is to exchange angular momentum with the wheels.

    Observation (10): the attitude error quaternion ``conj(target) * q`` (sign chosen
    with ``w >= 0``), the body angular rates (body frame, rad/s) and the three wheel
    speeds (rad/s). Reward: ``-angle(error) - effort_weight * sum(action**2)`` with the
    angle in radians, ``[0, pi]``. Never terminates; truncated after
    ``max_episode_steps`` (200 steps of ``dt = 0.05`` s).

    Reset: attitude rotated from the target by a random axis and an angle
    ``U(0, max_initial_angle)``, body rates ``U(-max_initial_rate, max_initial_rate)``,
    wheels at rest. The target is the identity, or a uniform random attitude per
    episode with ``random_target=True``.

    Args:
        effort_weight: weight of ``sum(action**2)`` (0.01).
        max_initial_angle: the largest initial pointing error, radians (pi).
        max_initial_rate: the largest initial body rate, rad/s (0.05).
        random_target: draw a random target attitude per episode (False).
        max_episode_steps: 200.
        **kwargs: :class:`MujocoEnv` arguments.

    Example:
        >>> env = SatelliteEnv(num_envs=4, seed=0)
        >>> env.rollout(3)["next", "observation"].shape
        torch.Size([4, 3, 10])
    """

    MODEL = ASSET
    FRAME_SKIP = 5

    def __init__(
        self,
        *,
        effort_weight: float = 0.01,
        max_initial_angle: float = np.pi,
        max_initial_rate: float = 0.05,
        random_target: bool = False,
        max_episode_steps: int = 200,
        **kwargs: Any,
    ) -> None:
        self.effort_weight = effort_weight
        self.max_initial_angle = max_initial_angle
        self.max_initial_rate = max_initial_rate
        self.random_target = random_target
        self._target = np.tile([1.0, 0.0, 0.0, 0.0], (int(kwargs.get("num_envs", 1)), 1))
        super().__init__(kwargs.pop("model", None), max_episode_steps=max_episode_steps, **kwargs)

    @property
    def target(self) -> np.ndarray:
        """The target attitude quaternions ``[N, 4]`` (w, x, y, z)."""
        return self._target.copy()

    def _sample_initial_state(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        qpos = np.tile(self.init_qpos, (n, 1))
        qvel = np.zeros((n, self.model.nv))
        qpos[:, 3:7] = _axis_angle_quat(self.np_random, n, self.max_initial_angle)
        r = self.max_initial_rate
        qvel[:, 3:6] = self.np_random.uniform(-r, r, size=(n, 3))
        return qpos, qvel

    def _reset_task(self, rows: np.ndarray) -> None:
        if self.random_target:
            self._target[rows] = random_quat(self.np_random, len(rows))
        # the initial attitude was drawn relative to the identity: rotate it onto the target
        sim = self._physics.read()
        qpos, qvel = sim["qpos"][rows].copy(), sim["qvel"][rows].copy()
        if self.random_target:
            qpos[:, 3:7] = quat_mul(self._target[rows], qpos[:, 3:7])
            self._physics.reset(rows, qpos, qvel)

    def _error(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        err = quat_mul(quat_conj(self._target), sim["qpos"][:, 3:7])
        return err * np.where(err[:, :1] < 0, -1.0, 1.0)

    def _make_obs(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([self._error(sim), sim["qvel"][:, 3:6], sim["qvel"][:, 6:9]], axis=1)

    def _compute_reward(
        self, prev: dict[str, np.ndarray], action: np.ndarray, sim: dict[str, np.ndarray]
    ) -> np.ndarray:
        return -quat_angle(self._error(sim)) - self.effort_weight * np.square(action).sum(1)

    def _task_state(self) -> dict[str, Any]:
        return {"target": self._target.copy()}

    def _set_task_state(self, state: dict[str, Any]) -> None:
        self._target = np.array(state["target"], dtype=np.float64)
