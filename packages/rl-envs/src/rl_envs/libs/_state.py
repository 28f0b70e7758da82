"""Capture and restore of the mutable episode state of Python env objects (private).

Used by ``GymWrapper.get_state`` and ``DMControlWrapper.get_state``. For one
object (a Gymnasium wrapper layer, an unwrapped env, a dm-control task) the
state is the dict of its instance attributes whose values are of a *captured
kind*:

* immutable scalars: ``None``, bool, int, float, str, numpy scalars, enums;
* numpy arrays (copied);
* ``numpy.random.Generator`` (its ``bit_generator.state``) and
  ``numpy.random.RandomState`` (``get_state()``);
* MuJoCo's ``MjData`` (a deep copy; restored in place with ``mujoco.mj_copyData``,
  so the env keeps its own model and data objects);
* lists, tuples, deques and dicts whose items are all of a captured kind.

Everything else (the ``env`` link to the next layer, spaces, specs, models,
renderers, sub-env lists) is skipped. Restoring writes arrays, generators and
``MjData`` in place when the current attribute is of the same kind (aliases stay
valid) and assigns otherwise; an attribute whose current value is not of a
captured kind (e.g. a renderer created since) is left alone.
"""

from __future__ import annotations

import collections
import copy
import enum
from typing import Any

import numpy as np

__all__ = ["SKIP", "capture", "capture_object", "restore_object"]


class _Skip:
    """Marks a value that is not of a captured kind."""

    def __repr__(self) -> str:
        return "SKIP"


SKIP = _Skip()

_SCALARS = (type(None), bool, int, float, complex, str, bytes, np.generic, enum.Enum)


_GEN = "__numpy.random.Generator__"  # tags of plain dicts, so a state pickles
_RS = "__numpy.random.RandomState__"  # without any class of this package


def _is_mjdata(value: Any) -> bool:
    cls = type(value)
    return cls.__name__ == "MjData" and cls.__module__.startswith("mujoco")


def _captured_kind(value: Any) -> bool:
    """Whether :func:`capture` keeps ``value`` (without copying anything)."""
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype != object
    if isinstance(value, (np.random.Generator, np.random.RandomState)) or _is_mjdata(value):
        return True
    if isinstance(value, (list, tuple, collections.deque)):
        return all(_captured_kind(v) for v in value)
    if type(value) is dict:
        return all(_captured_kind(v) for v in value.values())
    return False


def capture(value: Any) -> Any:
    """The captured copy of ``value``, or ``SKIP`` when it is not of a captured kind."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, np.ndarray):
        return SKIP if value.dtype == object else value.copy()
    if isinstance(value, np.random.Generator):
        return {_GEN: copy.deepcopy(value.bit_generator.state)}
    if isinstance(value, np.random.RandomState):
        return {_RS: value.get_state()}
    if _is_mjdata(value):
        return copy.deepcopy(value)
    if isinstance(value, (list, tuple, collections.deque)):
        items = [capture(v) for v in value]
        if any(v is SKIP for v in items):
            return SKIP
        if isinstance(value, collections.deque):
            return collections.deque(items, maxlen=value.maxlen)
        return items if isinstance(value, list) else tuple(items)
    if type(value) is dict:
        out = {k: capture(v) for k, v in value.items()}
        return SKIP if any(v is SKIP for v in out.values()) else out
    return SKIP


def _restore(current: Any, saved: Any) -> Any:
    """The value to assign for ``saved``, written into ``current`` in place when possible."""
    if isinstance(saved, dict) and _GEN in saved:
        state = saved[_GEN]
        gen = current
        if not isinstance(gen, np.random.Generator):
            gen = np.random.Generator(getattr(np.random, state["bit_generator"])())
        gen.bit_generator.state = copy.deepcopy(state)
        return gen
    if isinstance(saved, dict) and _RS in saved:
        rs = current if isinstance(current, np.random.RandomState) else np.random.RandomState()
        rs.set_state(saved[_RS])
        return rs
    if _is_mjdata(saved):
        if _is_mjdata(current):
            import mujoco

            mujoco.mj_copyData(current, current.model, saved)
            return current
        return copy.deepcopy(saved)
    if isinstance(saved, np.ndarray):
        if (
            isinstance(current, np.ndarray)
            and current.shape == saved.shape
            and current.dtype == saved.dtype
            and current.flags.writeable
        ):
            current[...] = saved
            return current
        return saved.copy()
    return copy.deepcopy(saved)


def capture_object(obj: Any, skip: tuple[str, ...] = ("env", "envs")) -> dict[str, Any]:
    """The captured attributes of ``obj`` (see the module docstring)."""
    out = {}
    for name, value in vars(obj).items():
        if name in skip:
            continue
        saved = capture(value)
        if saved is not SKIP:
            out[name] = saved
    return out


def restore_object(obj: Any, state: dict[str, Any]) -> None:
    """Writes a :func:`capture_object` result back into ``obj``."""
    attrs = vars(obj)
    for name, saved in state.items():
        current = attrs.get(name, SKIP)
        if name in attrs and not _captured_kind(current):
            continue  # e.g. a renderer created since: not ours to clobber
        setattr(obj, name, _restore(current, saved))
