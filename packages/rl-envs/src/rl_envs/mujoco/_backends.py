"""Choosing a physics backend by name, with errors that name the missing extra."""

from __future__ import annotations

from typing import Any

__all__ = ["BACKENDS", "make_backend"]

BACKENDS = ("mujoco", "mjx")


def make_backend(
    name: str, model: Any, num_envs: int, fields: tuple[str, ...], num_threads: int
) -> Any:
    """The physics backend ``name`` for ``num_envs`` copies of ``model``.

    Args:
        name: ``"mujoco"`` (the C library, a thread pool over ``MjData``) or ``"mjx"``
            (MuJoCo XLA on JAX: CPU here, GPU where JAX has one).
        model: the compiled ``mujoco.MjModel``.
        num_envs: the batch size.
        fields: ``MjData`` fields the task reads after each step.
        num_threads: threads of the ``"mujoco"`` backend (ignored by ``"mjx"``).

    Raises:
        ValueError: an unknown name.
        ImportError: the backend's packages are missing; the message names the extra.

    Example:
        >>> from rl_envs.mujoco._model import load_model
        >>> m = load_model("<mujoco><worldbody><geom size='1'/></worldbody></mujoco>")
        >>> make_backend("mujoco", m, 2, ("qpos",), 1).name
        'mujoco'
    """
    if name == "mujoco":
        from rl_envs.mujoco._backend_mujoco import MujocoBackend

        return MujocoBackend(model, num_envs, fields, num_threads=num_threads)
    if name == "mjx":
        from rl_envs.mujoco._backend_mjx import MJXBackend

        return MJXBackend(model, num_envs, fields)
    if name in ("warp", "mujoco-warp", "mujoco_warp"):
        raise ValueError(
            f"backend={name!r} is not offered: MuJoCo Warp needs NVIDIA's `warp` package and a "
            "CUDA GPU, and was not built here. Use backend='mjx' (JAX) or 'mujoco'."
        )
    if name == "mujoco-torch":
        raise ValueError(
            "backend='mujoco-torch' (TorchRL's default, a torch port of MuJoCo) is not offered "
            "here; use backend='mujoco' (the C library, batched with threads) or 'mjx'."
        )
    raise ValueError(f"Unknown physics backend {name!r}; expected one of {BACKENDS}.")
