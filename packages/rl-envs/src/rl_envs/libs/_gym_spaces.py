"""Gymnasium spaces to specs, and numpy <-> torch converters (private).

Pure functions of a space: no env is touched. The mapping (TorchRL's):

============== ===================================== ===================================
space          observation spec                      action spec
============== ===================================== ===================================
Box            Bounded (finite bounds) / Unbounded   same
Discrete(n)    Categorical(n), shape ()              OneHot(n) int64 (Categorical with
                                                     ``categorical_action_encoding``)
MultiDiscrete  MultiCategorical(nvec)                MultiOneHot(nvec) / MultiCategorical
MultiBinary(n) Binary(n)                             Binary(n)
Dict           nested Composite (keys at the root)   nested under "action"
Tuple          Composite with keys "0", "1", ...     same
============== ===================================== ===================================

A non-Dict observation space is stored under ``"observation"``; a Dict
observation space puts its keys at the root (nested Dicts nest).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rl_envs.specs import Binary, Bounded, Categorical, Composite, OneHot, Unbounded

Path = tuple[Any, ...]


@dataclass(frozen=True)
class Leaf:
    """One tensor entry of a (possibly structured) space.

    Attributes:
        key: the TensorDict key (a tuple of strings).
        path: indexes to reach the value in the gym object (dict keys, tuple ints).
        space: the leaf gymnasium space.
        spec: its spec (unbatched).
        np_dtype: the numpy dtype of the stored value.
    """

    key: tuple[str, ...]
    path: Path
    space: Any
    spec: Any
    np_dtype: np.dtype


def gymnasium_module() -> Any:
    """The ``gymnasium`` module, imported when first needed (it is an optional dependency)."""
    import gymnasium

    return gymnasium


_CONVERSIONS: dict[type, Callable[..., Any]] = {}


def register_gym_spec_conversion(
    space_type: type,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers how a Gymnasium space class becomes a spec (a decorator; TorchRL's name).

    The decorated function is called as ``fn(space, action=..., categorical_action_encoding=
    ..., device=...)`` for every space that is an instance of ``space_type`` (the closest
    registered class in its MRO wins, before the built-in conversions) and returns a tensor
    spec (``Bounded``, ``Unbounded``, ``Categorical``...) of the values the env produces.

    Example:
        >>> import gymnasium as gym
        >>> from rl_envs import Unbounded
        >>> class Ray(gym.spaces.Box):  # a custom space: unbounded rays
        ...     pass
        >>> @register_gym_spec_conversion(Ray)
        ... def _(space, **kwargs):
        ...     return Unbounded(space.shape, device=kwargs["device"])
        >>> leaf_spec(Ray(0, 1, (3,)), action=False, categorical=False, device=torch.device("cpu"))
        UnboundedContinuous(...)
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _CONVERSIONS[space_type] = fn
        return fn

    return register


def leaf_spec(space: Any, *, action: bool, categorical: bool, device: torch.device) -> Any:
    """The spec of a non-structured space (see the module table and
    :func:`register_gym_spec_conversion`)."""
    for cls in type(space).__mro__:
        fn = _CONVERSIONS.get(cls)
        if fn is not None:
            return fn(space, action=action, categorical_action_encoding=categorical, device=device)
    spaces = gymnasium_module().spaces
    if isinstance(space, spaces.Box):
        dtype = torch.from_numpy(np.zeros((), dtype=space.dtype)).dtype
        low, high = np.asarray(space.low), np.asarray(space.high)
        if np.issubdtype(space.dtype, np.floating) and not (
            np.isfinite(low).all() and np.isfinite(high).all()
        ):
            return Unbounded(shape=space.shape, dtype=dtype, device=device)
        return Bounded(
            low=torch.as_tensor(low, dtype=dtype),
            high=torch.as_tensor(high, dtype=dtype),
            shape=space.shape,
            dtype=dtype,
            device=device,
        )
    if isinstance(space, spaces.Discrete):
        n = int(space.n)
        if action and not categorical:
            return OneHot(n, shape=(n,), dtype=torch.int64, device=device)
        return Categorical(n, shape=(), dtype=torch.int64, device=device)
    if isinstance(space, spaces.MultiDiscrete):
        nvec = [int(x) for x in np.asarray(space.nvec).flatten()]
        if action and not categorical:
            from rl_envs.specs.multi_one_hot import MultiOneHot

            return MultiOneHot(nvec, dtype=torch.int64, device=device)
        from rl_envs.specs.multi_categorical import MultiCategorical

        return MultiCategorical(
            torch.as_tensor(space.nvec), shape=space.shape, dtype=torch.int64, device=device
        )
    if isinstance(space, spaces.MultiBinary):
        shape = tuple(np.atleast_1d(space.n).tolist()) if space.shape == () else space.shape
        return Binary(shape[-1], shape=shape, dtype=torch.int8, device=device)
    raise TypeError(
        f"Unsupported Gymnasium space {space!r}: rl_envs handles Box, Discrete, MultiDiscrete, "
        "MultiBinary, Dict and Tuple. Register a conversion for its class with "
        "register_gym_spec_conversion, or wrap the env with a gymnasium ObservationWrapper / "
        "ActionWrapper that maps it to one of these."
    )


def flatten_space(
    space: Any, root: str, *, action: bool, categorical: bool, device: torch.device
) -> list[Leaf]:
    """All leaves of ``space``. Dict observations sit at the root, others under ``root``."""
    spaces = gymnasium_module().spaces
    leaves: list[Leaf] = []

    def visit(sp: Any, key: tuple[str, ...], path: Path) -> None:
        if isinstance(sp, spaces.Dict):
            for name, sub in sp.spaces.items():
                visit(sub, (*key, str(name)), (*path, name))
        elif isinstance(sp, spaces.Tuple):
            for i, sub in enumerate(sp.spaces):
                visit(sub, (*key, str(i)), (*path, i))
        else:
            spec = leaf_spec(sp, action=action, categorical=categorical, device=device)
            np_dtype = torch.empty((), dtype=spec.dtype).numpy().dtype
            leaves.append(Leaf(key, path, sp, spec, np_dtype))

    if isinstance(space, spaces.Dict) and not action:
        visit(space, (), ())
    else:
        visit(space, (root,), ())
    return leaves


def leaves_to_composite(leaves: list[Leaf], device: torch.device) -> Composite:
    """A ``Composite`` (shape ``()``) holding every leaf's spec at its key."""
    comp = Composite(shape=(), device=device)
    for leaf in leaves:
        comp[leaf.key] = leaf.spec
    return comp


def getter(path: Path) -> Callable[[Any], Any]:
    """A function reading the value at ``path`` inside a gym object."""
    if not path:
        return lambda obj: obj
    if len(path) == 1:
        (p,) = path
        return lambda obj: obj[p]

    def get(obj: Any) -> Any:
        for p in path:
            obj = obj[p]
        return obj

    return get


def obs_offset(space: Any) -> int:
    """``start`` of a Discrete space (subtracted from observations), else 0."""
    return (
        int(getattr(space, "start", 0))
        if isinstance(space, gymnasium_module().spaces.Discrete)
        else 0
    )


def action_to_gym(leaf: Leaf, value: torch.Tensor, categorical: bool) -> Any:
    """Converts an action tensor (any leading dims) to the numpy value gym expects."""
    spaces = gymnasium_module().spaces
    sp = leaf.space
    if value.requires_grad:  # a policy run outside no_grad
        value = value.detach()
    if value.device.type != "cpu":
        value = value.cpu()
    if isinstance(sp, spaces.Discrete):
        idx = value if categorical else value.argmax(-1)
        arr = idx.numpy()
        start = int(sp.start)
        return arr + start if start else arr
    if isinstance(sp, spaces.MultiDiscrete):
        if categorical:
            return value.numpy()
        parts = value.split([int(n) for n in np.asarray(sp.nvec).flatten()], dim=-1)
        idx = torch.stack([p.argmax(-1) for p in parts], -1)
        return idx.reshape(*value.shape[:-1], *sp.shape).numpy()
    arr = value.numpy()
    if arr.dtype != sp.dtype:
        arr = arr.astype(sp.dtype)
    return arr


def assemble(leaves: list[Leaf], values: list[Any]) -> Any:
    """Rebuilds a (possibly Dict / Tuple) gym action from per-leaf values."""
    if len(leaves) == 1 and not leaves[0].path:
        return values[0]
    root: dict[Any, Any] = {}
    for leaf, value in zip(leaves, values, strict=True):
        node = root
        for p in leaf.path[:-1]:
            node = node.setdefault(p, {})
        node[leaf.path[-1]] = value
    return _tuplify(root)


def _tuplify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    out = {k: _tuplify(v) for k, v in node.items()}
    if out and all(isinstance(k, int) for k in out):
        return tuple(out[i] for i in range(len(out)))
    return out
