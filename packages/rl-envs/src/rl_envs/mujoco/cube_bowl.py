"""``CubeBowlEnv``: a gantry arm with a suction gripper places a cube into a bowl.

Also its macro actions (``CubeBowlMacroTransform`` / ``cube_bowl_macro_env``: "move the
end-effector to (x, y, z) with the suction on/off") and a scripted macro policy
(``CubeBowlScriptedPolicy``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_envs.mujoco.base import MujocoEnv
from rl_envs.mujoco.macro import MacroActionEnv
from rl_envs.specs import Bounded
from rl_envs.transforms.macro_primitive import MacroPrimitiveTransform

__all__ = ["CubeBowlEnv", "CubeBowlMacroTransform", "CubeBowlScriptedPolicy", "cube_bowl_macro_env"]

ASSET = Path(__file__).parent / "assets" / "cube_bowl.xml"
BOWL_XY = np.array([0.3, 0.0])
BOWL_RADIUS = 0.05  # inner walls at 0.064
HOME = np.array([0.0, 0.0, 0.2])


class CubeBowlEnv(MujocoEnv):
    """Put the cube into the bowl with a Cartesian arm and a suction cup.

    Model (``assets/cube_bowl.xml``, our own MJCF): a gantry with x/y/z slides driven by
    position actuators, a palm with an adhesion actuator (the suction cup), a 4 cm cube
    and a bowl at ``(0.3, 0)`` (a base and eight walls, 4 cm high).

    Action (4): position targets ``x in [-0.4, 0.5]``, ``y in [-0.3, 0.3]``,
    ``z in [0.02, 0.4]`` of the palm centre and the suction ``[0, 1]``.
    Observation (13): palm position (3), suction control (1), cube position (3),
    cube velocity (3), bowl centre minus cube position (3).
    Reward: ``-distance_xy(cube, bowl) + success_bonus * success``; terminated on success:
    the cube rests in the bowl (within 5 cm of its centre in xy, below 4 cm, speed below
    0.05 m/s) with the suction off. Truncated after ``max_episode_steps`` (200 x 0.05 s).
    Reset: the palm at ``(0, 0, 0.2)``; the cube flat at a uniform position in
    ``x in [-0.3, 0.1]``, ``y in [-0.2, 0.2]``.

    Args:
        success_bonus: reward added on success (10.0).
        max_episode_steps: 200.
        **kwargs: :class:`MujocoEnv` arguments.

    Example:
        >>> env = CubeBowlEnv(num_envs=2, seed=0)
        >>> env.rollout(3)["next", "observation"].shape
        torch.Size([2, 3, 13])
    """

    MODEL = ASSET
    FRAME_SKIP = 10
    SIM_FIELDS = ("qpos", "qvel", "ctrl")

    def __init__(
        self, *, success_bonus: float = 10.0, max_episode_steps: int = 200, **kwargs: Any
    ) -> None:
        self.success_bonus = success_bonus
        super().__init__(kwargs.pop("model", None), max_episode_steps=max_episode_steps, **kwargs)

    def _sample_initial_state(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        qpos = np.tile(self.init_qpos, (n, 1))
        qpos[:, :3] = HOME
        qpos[:, 3] = self.np_random.uniform(-0.3, 0.1, size=n)
        qpos[:, 4] = self.np_random.uniform(-0.2, 0.2, size=n)
        qpos[:, 5] = 0.02
        return qpos, np.zeros((n, self.model.nv))

    def _make_obs(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        qpos, qvel = sim["qpos"], sim["qvel"]
        cube = qpos[:, 3:6]
        bowl = np.concatenate([np.tile(BOWL_XY, (len(cube), 1)), np.zeros((len(cube), 1))], 1)
        return np.concatenate(
            [qpos[:, :3], sim["ctrl"][:, 3:4], cube, qvel[:, 3:6], bowl - cube], 1
        )

    def _success(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        cube = sim["qpos"][:, 3:6]
        in_xy = np.linalg.norm(cube[:, :2] - BOWL_XY, axis=1) < BOWL_RADIUS
        resting = np.linalg.norm(sim["qvel"][:, 3:6], axis=1) < 0.05
        return in_xy & (cube[:, 2] < 0.04) & resting & (sim["ctrl"][:, 3] < 0.5)

    def _compute_reward(
        self, prev: dict[str, np.ndarray], action: np.ndarray, sim: dict[str, np.ndarray]
    ) -> np.ndarray:
        dist = np.linalg.norm(sim["qpos"][:, 3:5] - BOWL_XY, axis=1)
        return -dist + self.success_bonus * self._success(sim)

    def _compute_terminated(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        return self._success(sim)


class CubeBowlMacroTransform(MacroPrimitiveTransform):
    """Macro "palm to (x, y, z), suction s" for :class:`CubeBowlEnv`.

    A raw ``[x, y, z, s]`` action moves the position targets linearly from the palm's
    observed position to ``(x, y, z)`` over ``macro_steps`` steps and holds them
    ``settle_steps`` more, with the suction at ``s`` throughout.

    Example:
        >>> from tensordict import TensorDict
        >>> t = CubeBowlMacroTransform(macro_steps=2, settle_steps=1)
        >>> td = TensorDict(observation=torch.zeros(1, 13), action=torch.ones(1, 4), batch_size=[1])
        >>> t.inv(td)["action"][0].tolist()
        [[0.5, 0.5, 0.5, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    """

    def _resolve(
        self, tensordict: TensorDictBase, action: Any
    ) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        _, target, steps, settle = super()._resolve(tensordict, action)
        palm = tensordict.get("observation")[..., :3].to(target)
        return torch.cat([palm, target[..., 3:]], -1), target, steps, settle


def cube_bowl_macro_env(
    env: CubeBowlEnv, move_steps: int = 12, hold_steps: int = 8
) -> MacroActionEnv:
    """``env`` driven by macro actions "palm to (x, y, z), suction s".

    One macro action ``[x, y, z, s]`` becomes ``move_steps + hold_steps`` low-level steps
    (:class:`CubeBowlMacroTransform`: a smooth path the carried cube can follow, then a
    hold). Moving to the current position with another ``s`` is "close/open the gripper".

    Example:
        >>> macro = cube_bowl_macro_env(CubeBowlEnv(num_envs=2, seed=0))
        >>> macro.action_spec.shape
        torch.Size([2, 4])
    """
    plan = CubeBowlMacroTransform(action_dim=4, macro_steps=move_steps, settle_steps=hold_steps)
    spec = env.action_spec_unbatched
    macro_spec = Bounded(
        low=spec.space.low, high=spec.space.high, shape=spec.shape, dtype=env.dtype
    )
    return MacroActionEnv(env, plan.expand, macro_spec)


class CubeBowlScriptedPolicy:
    """A scripted macro policy for :func:`cube_bowl_macro_env`, from the observation alone.

    Not holding the cube: go above it, descend onto it, switch the suction on. Holding it:
    lift, carry above the bowl, lower, switch the suction off. A cube that came loose is
    released and picked again. Writes ``"action"`` (the macro action ``[x, y, z, s]``).

    Example:
        >>> env = cube_bowl_macro_env(CubeBowlEnv(num_envs=2, seed=0))
        >>> env.rollout(3, CubeBowlScriptedPolicy())["action"].shape
        torch.Size([2, 3, 4])
    """

    carry_z = 0.2
    release_z = 0.075

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        obs = td.get("observation").double().numpy()
        palm, suction, cube = obs[:, :3], obs[:, 3], obs[:, 4:7]
        bowl = cube + obs[:, 10:13]
        act = np.concatenate([palm, np.zeros((len(obs), 1))], 1)
        for i in range(len(obs)):
            act[i] = self._plan(palm[i], suction[i] > 0.5, cube[i], bowl[i])
        td.set("action", torch.as_tensor(act, dtype=td.get("observation").dtype))
        return td

    def _plan(self, palm: np.ndarray, on: bool, cube: np.ndarray, bowl: np.ndarray) -> np.ndarray:
        def to(xy: np.ndarray, z: float, s: float) -> np.ndarray:
            return np.array([xy[0], xy[1], z, s])

        above_cube = np.linalg.norm(palm[:2] - cube[:2]) < 0.01
        in_bowl = np.linalg.norm(cube[:2] - bowl[:2]) < BOWL_RADIUS and cube[2] < 0.04
        if not on:
            if in_bowl:
                return to(palm[:2], max(palm[2], self.release_z), 0.0)  # done: stay clear
            if not above_cube:
                return to(cube[:2], self.carry_z, 0.0)
            if palm[2] > cube[2] + 0.05:
                return to(cube[:2], cube[2] + 0.02, 0.0)  # press onto the cube's top
            return to(palm[:2], palm[2], 1.0)  # suction on
        attached = np.linalg.norm(cube - (palm - np.array([0.0, 0.0, 0.04]))) < 0.03
        if not attached:
            return to(palm[:2], palm[2], 0.0)  # lost it: release and start over
        if np.linalg.norm(palm[:2] - bowl[:2]) > 0.01:
            if palm[2] < self.carry_z - 0.02:
                return to(palm[:2], self.carry_z, 1.0)
            return to(bowl[:2], self.carry_z, 1.0)
        if palm[2] > self.release_z + 0.02:
            return to(bowl[:2], self.release_z, 1.0)
        return to(palm[:2], palm[2], 0.0)  # suction off: drop it in
