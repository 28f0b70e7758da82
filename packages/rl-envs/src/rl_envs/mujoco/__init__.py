"""Native, batched MuJoCo environments on the ``mujoco`` bindings (extra ``rl-envs[mujoco]``).

``MujocoEnv`` is the task base (model + observation/reward/termination/reset noise);
the locomotion tasks reproduce Gymnasium's v5 definitions. The ``mujoco`` package is
imported when an env is built, so importing this module never needs it.
"""

from rl_envs.mujoco.base import MujocoEnv
from rl_envs.mujoco.cube_bowl import (
    CubeBowlEnv,
    CubeBowlMacroTransform,
    CubeBowlScriptedPolicy,
    cube_bowl_macro_env,
)
from rl_envs.mujoco.locomotion import AntEnv, HalfCheetahEnv, HopperEnv, Walker2dEnv
from rl_envs.mujoco.macro import MacroActionEnv
from rl_envs.mujoco.satellite import SatelliteEnv

__all__ = [
    "AntEnv",
    "CubeBowlEnv",
    "CubeBowlMacroTransform",
    "CubeBowlScriptedPolicy",
    "HalfCheetahEnv",
    "HopperEnv",
    "MacroActionEnv",
    "MujocoEnv",
    "SatelliteEnv",
    "Walker2dEnv",
    "cube_bowl_macro_env",
]
