"""Batched unit-quaternion helpers in MuJoCo's ``(w, x, y, z)`` order (NumPy, ``[N, 4]``)."""

from __future__ import annotations

import numpy as np

__all__ = ["quat_angle", "quat_conj", "quat_mul", "random_quat"]


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of ``[..., 4]`` quaternions.

    Example:
        >>> quat_mul(np.array([1.0, 0, 0, 0]), np.array([0.0, 1, 0, 0])).tolist()
        [0.0, 1.0, 0.0, 0.0]
    """
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conj(q: np.ndarray) -> np.ndarray:
    """The conjugate (the inverse of a unit quaternion)."""
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def quat_angle(q: np.ndarray) -> np.ndarray:
    """Rotation angle in ``[0, pi]`` of unit quaternions ``[..., 4]``.

    Example:
        >>> round(float(quat_angle(np.array([np.cos(0.5), 0, 0, np.sin(0.5)]))), 6)
        1.0
    """
    w = np.clip(np.abs(q[..., 0]), 0.0, 1.0)
    return 2.0 * np.arccos(w)


def random_quat(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` uniformly distributed unit quaternions (Shoemake's method), ``w >= 0``."""
    u1, u2, u3 = rng.random((3, n))
    q = np.stack(
        [
            np.sqrt(u1) * np.cos(2 * np.pi * u3),
            np.sqrt(1 - u1) * np.sin(2 * np.pi * u2),
            np.sqrt(1 - u1) * np.cos(2 * np.pi * u2),
            np.sqrt(u1) * np.sin(2 * np.pi * u3),
        ],
        axis=-1,
    )
    return q * np.where(q[:, :1] < 0, -1.0, 1.0)
