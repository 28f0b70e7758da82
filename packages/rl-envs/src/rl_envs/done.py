"""Done flags at any depth: reset keys, done-key groups and ``terminated_or_truncated``.

An env's done flags may live at the root (``"done"``, ``"terminated"``, ...) or in
sub-TensorDicts (``("agents", "done")``: one flag per agent). Each TensorDict level that
holds done leaves is a *group*; its reset key is ``(*prefix, "_reset")``. These
functions read the groups from the env's ``full_done_spec`` (TorchRL's conventions).

Example:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from rl_envs.specs import Categorical, Composite
    >>> spec = Composite(done=Categorical(2, shape=(1,), dtype=torch.bool),
    ...                  agents={"done": Categorical(2, shape=(1,), dtype=torch.bool)})
    >>> done_keys_groups(spec)
    [['done'], [('agents', 'done')]]
    >>> td = TensorDict(done=torch.tensor([True]), agents={"done": torch.tensor([False])})
    >>> terminated_or_truncated(td, spec), td["_reset"], td["agents", "_reset"]
    (True, tensor([True]), tensor([False]))
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

__all__ = [
    "any_done",
    "batch_done",
    "batch_reset_mask",
    "done_keys_groups",
    "reset_keys",
    "sort_by_depth",
    "terminated_or_truncated",
]


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)


def _unravel(key: tuple[str, ...]) -> NestedKey:
    return key[0] if len(key) == 1 else key


def sort_by_depth(keys: Any) -> list[NestedKey]:
    """``keys`` sorted by nesting depth, then by name (TorchRL's order of key lists)."""
    return sorted(keys, key=lambda k: (len(_as_tuple(k)) - 1, ".".join(_as_tuple(k))))


def done_keys_groups(full_done_spec: Any) -> list[list[NestedKey]]:
    """The done leaves of ``full_done_spec`` grouped by the level that holds them.

    Groups are sorted by depth, as :func:`reset_keys` (the root group first).
    """
    groups: dict[tuple[str, ...], list[NestedKey]] = {}
    for key in sort_by_depth(full_done_spec.keys(True, True)):
        prefix = _as_tuple(key)[:-1]
        if prefix in groups:
            continue
        level = full_done_spec[prefix] if prefix else full_done_spec
        groups[prefix] = [
            _unravel((*prefix, name))
            for name, spec in level.items()
            if spec is not None and not hasattr(spec, "keys")
        ]
    return list(groups.values())


def reset_keys(full_done_spec: Any) -> list[NestedKey]:
    """``(*prefix, "_reset")`` for each done group, sorted by depth."""
    return sort_by_depth(
        _unravel((*_as_tuple(group[0])[:-1], "_reset"))
        for group in done_keys_groups(full_done_spec)
    )


def terminated_or_truncated(
    data: TensorDictBase,
    full_done_spec: Any = None,
    key: str | None = "_reset",
    write_full_false: bool = False,
) -> bool:
    """Whether any done flag of ``data`` is set; writes each group's OR under ``key``.

    For every level holding done leaves (``full_done_spec``'s, or ``"done"`` /
    ``"terminated"`` / ``"truncated"`` entries found in ``data`` when it is ``None``),
    the OR of its leaves is written at ``(*prefix, key)``. A leaf missing from ``data``
    counts as ``False``. Done flags at a level take precedence over the levels below
    it: a nested group's flags only count toward the result where the level above has
    no done leaf. If nothing is done, the written keys are removed again unless
    ``write_full_false`` (``key=None`` writes nothing).

    Args:
        data: a TensorDict holding done flags (e.g. ``td["next"]`` after ``env.step``).
        full_done_spec: the env's ``full_done_spec``; ``None`` searches ``data``.
        key: the name of the aggregated flag (``"_reset"``), or ``None``.
        write_full_false: keep the written keys even when nothing is done.

    Returns:
        ``True`` if any done flag that counts is ``True``.
    """
    written: list[tuple[str, ...]] = []

    def visit(td: TensorDictBase | None, spec: Any, prefix: tuple[str, ...]) -> bool:
        if td is None:
            return False
        if spec is None:
            names = ("done", "terminated", "truncated")
            leaves = [n for n in names if td.get(n, None) is not None]
            subs = {n: None for n, v in td.items() if isinstance(v, TensorDictBase)}
        else:
            leaves = [n for n, s in spec.items() if s is not None and not hasattr(s, "keys")]
            subs = {n: s for n, s in spec.items() if s is not None and hasattr(s, "keys")}
        any_done = False
        for name, sub in subs.items():
            found = visit(td.get(name, None), sub, (*prefix, name))
            if not leaves:
                any_done = any_done or found
        if not leaves:
            return any_done
        agg = None
        for name in leaves:
            flag = td.get(name, None)
            if flag is None:
                flag = torch.zeros((*td.shape, 1), dtype=torch.bool, device=td.device)
            agg = flag if agg is None else agg | flag
        if key is not None:
            td.set(key, agg)
            written.append((*prefix, key))
        return any_done or bool(agg.any())

    result = visit(data, full_done_spec, ())
    if not result and not write_full_false and written:
        data.exclude(*[_unravel(k) for k in written], inplace=True)
    return result


def batch_reset_mask(
    data: TensorDictBase, keys: list[NestedKey], batch_ndim: int
) -> torch.Tensor | None:
    """The OR of the reset flags ``keys`` found in ``data``, reduced to the batch dims.

    A nested flag (e.g. one per agent, ``[*B, n_agents, 1]``) resets the batch entry
    when any of its values is ``True``. ``None`` when ``data`` holds none of ``keys``.
    """
    mask = None
    for key in keys:
        flag = data.get(key, None)
        if flag is None:
            continue
        flag = (
            flag.reshape(*flag.shape[:batch_ndim], -1).any(-1) if flag.ndim > batch_ndim else flag
        )
        mask = flag if mask is None else mask | flag
    return mask


def any_done(next_td: TensorDictBase, full_done_spec: Any) -> bool:
    """Whether a step's output is done anywhere: its root ``"done"`` when it has one,
    else :func:`terminated_or_truncated` over ``full_done_spec`` (writing nothing)."""
    done = next_td.get("done", None)
    if done is not None:
        return bool(done.any())
    return terminated_or_truncated(next_td, full_done_spec, key=None)


def batch_done(
    next_td: TensorDictBase, done_keys: list[NestedKey], batch_ndim: int
) -> torch.Tensor:
    """The root ``"done"`` of a step's output, else the OR of ``done_keys`` over the batch dims.

    Raises:
        KeyError: ``next_td`` holds none of the done keys.
    """
    done = next_td.get("done", None)
    if done is not None:
        return done
    done = batch_reset_mask(next_td, done_keys, batch_ndim)
    if done is None:
        raise KeyError(f"The step output holds none of the env's done keys {done_keys}.")
    return done
