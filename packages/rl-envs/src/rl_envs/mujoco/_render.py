"""Offscreen rendering of ``MjData`` into uint8 frames through ``mujoco.Renderer``."""

from __future__ import annotations

import functools
import subprocess
import sys
from typing import Any

import numpy as np

from rl_envs.mujoco._model import import_optional

__all__ = ["PixelRenderer", "rendering_available"]

_GL_HINT = (
    "MuJoCo could not create an OpenGL context for offscreen rendering. Set MUJOCO_GL=egl "
    "(GPU machines) or MUJOCO_GL=osmesa (CPU, needs libosmesa) before importing mujoco, or "
    "build the env with from_pixels=False."
)


class PixelRenderer:
    """Renders one camera of a model at ``height x width``.

    Args:
        model: the ``mujoco.MjModel``.
        width: frame width in pixels.
        height: frame height in pixels.
        camera_id: the camera (``-1``: the free camera).

    Raises:
        RuntimeError: no OpenGL context could be created (the message says how to get one).

    Example:
        >>> import mujoco
        >>> m = mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom size='1'/></worldbody></mujoco>")
        >>> r = PixelRenderer(m, 32, 24, -1)  # doctest: +SKIP
        >>> r.render(mujoco.MjData(m)).shape  # doctest: +SKIP
        (24, 32, 3)
    """

    def __init__(self, model: Any, width: int, height: int, camera_id: int = 0) -> None:
        mujoco = import_optional("mujoco", "MujocoEnv(from_pixels=True)")
        if camera_id >= model.ncam:
            raise ValueError(
                f"camera_id={camera_id} but the model has {model.ncam} camera(s); pass "
                "camera_id=-1 for the free camera or add a <camera> to the MJCF."
            )
        if not rendering_available():
            raise RuntimeError(_GL_HINT)
        self.width, self.height, self.camera_id = int(width), int(height), int(camera_id)
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, self.height)
        try:
            self._renderer = mujoco.Renderer(model, self.height, self.width)
        except Exception as err:  # the GL layers raise many types (EGLError, AttributeError)
            raise RuntimeError(f"{_GL_HINT} ({type(err).__name__}: {err})") from err

    def render(self, data: Any) -> np.ndarray:
        """The RGB frame of ``data`` (uint8 ``[height, width, 3]``)."""
        self._renderer.update_scene(data, camera=self.camera_id)
        return self._renderer.render().copy()

    def close(self) -> None:
        """Frees the GL context."""
        self._renderer.close()


_PROBE = (
    "import mujoco\n"
    "m = mujoco.MjModel.from_xml_string(\"<mujoco><worldbody><geom size='1'/></worldbody></mujoco>\")\n"
    "r = mujoco.Renderer(m, 8, 8)\n"
    "r.update_scene(mujoco.MjData(m))\n"
    "r.render()\n"
)


@functools.cache
def rendering_available() -> bool:
    """Whether ``mujoco.Renderer`` can create an offscreen context (probed once).

    The probe runs in a child process with this process's environment (``MUJOCO_GL``):
    a failed GL context leaves objects whose finalizers raise, which must not happen here.

    Example:
        >>> isinstance(rendering_available(), bool)
        True
    """
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
