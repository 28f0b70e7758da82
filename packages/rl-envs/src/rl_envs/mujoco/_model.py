"""Loading the ``mujoco`` bindings and MJCF models with errors that say what to do."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

__all__ = ["import_optional", "load_model"]

_EXTRAS = {"mujoco": "mujoco", "mujoco.mjx": "mjx", "jax": "mjx", "gymnasium": "mujoco"}


def import_optional(name: str, what: str) -> Any:
    """Imports module ``name`` or raises an ``ImportError`` naming the extra to install.

    Args:
        name: the module to import (``"mujoco"``, ``"mujoco.mjx"``, ``"jax"``).
        what: what needs it, for the message (e.g. ``'backend="mjx"'``).

    Example:
        >>> mujoco = import_optional("mujoco", "MujocoEnv")
    """
    try:
        return importlib.import_module(name)
    except ImportError as err:
        extra = _EXTRAS.get(name, "mujoco")
        raise ImportError(
            f"{what} needs the Python package {name!r}, which is not installed "
            f"({err}). Install the extra: pip install 'rl-envs[{extra}]'."
        ) from err


def _looks_like_xml(text: str) -> bool:
    return text.lstrip().startswith("<")


def load_model(source: Any, assets: dict[str, bytes] | None = None) -> Any:
    """A compiled ``mujoco.MjModel`` from an MJCF string, a file path or a model.

    Args:
        source: an ``MjModel`` (used as is), a path to an ``.xml`` file (``str`` or
            ``Path``), or the MJCF text itself (a string starting with ``<``).
        assets: optional ``{file name: bytes}`` for meshes/textures an MJCF string names.

    Returns:
        The compiled model.

    Raises:
        FileNotFoundError: the path does not exist.
        ValueError: the MuJoCo compiler rejected the model; the message holds the
            compiler's own error (with its line) and the file it came from.

    Example:
        >>> model = load_model("<mujoco><worldbody><geom size='1'/></worldbody></mujoco>")
        >>> model.ngeom
        1
    """
    mujoco = import_optional("mujoco", "MujocoEnv")
    if isinstance(source, mujoco.MjModel):
        return source
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not _looks_like_xml(source)):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(
                f"MJCF file {str(path)!r} does not exist. Pass an existing .xml path, the "
                "MJCF text itself (a string starting with '<'), or a mujoco.MjModel."
            )
        try:
            return mujoco.MjModel.from_xml_path(str(path))
        except ValueError as err:
            raise ValueError(
                f"The MuJoCo compiler rejected the model in {str(path)!r}:\n{err}\n"
                "Fix the MJCF at the line given above."
            ) from err
    if not isinstance(source, str):
        raise TypeError(
            f"model must be an MJCF string, a path or a mujoco.MjModel, got "
            f"{type(source).__name__}."
        )
    try:
        return mujoco.MjModel.from_xml_string(source, assets or {})
    except ValueError as err:
        raise ValueError(
            f"The MuJoCo compiler rejected the model given as an MJCF string "
            f"(<string>, {len(source)} characters):\n{err}\nFix the MJCF at the line given above."
        ) from err
