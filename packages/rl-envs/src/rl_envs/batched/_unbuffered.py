"""``use_buffers=False``: batched envs that pass TensorDicts instead of shared buffers.

With buffers (the default where the specs allow it) every step copies into
preallocated TensorDicts (``_layout``). Without them, sub-env ``i`` gets row ``i``
of the input, its output is kept as it is, and the rows are stacked with
``LazyStackedTensorDict.maybe_dense_stack``: a dense TensorDict when the rows agree
in shape, a lazy stack otherwise. That is what envs whose observations change
shape between steps (a ``-1`` in a spec) or carry non-tensor data need; it costs
one TensorDict per sub-env per step (and pickling for ``ParallelEnv``).

The parent builds the per-row inputs (:func:`step_items`, :func:`reset_items`),
the sub-env group runs them (``EnvGroup.step_unbuffered`` /
``EnvGroup.reset_unbuffered``) and :func:`stack_rows` assembles the outputs.
"""

from __future__ import annotations

from typing import Any

from tensordict import LazyStackedTensorDict, TensorDictBase

from rl_envs.batched._layout import SubEnvMeta
from rl_envs.batched._worker import KEEP
from rl_envs.specs import NonTensor

__all__ = ["keep_rows", "reset_items", "skip_rows", "stack_rows", "step_items", "wants_buffers"]


def wants_buffers(meta: SubEnvMeta) -> bool:
    """Whether the sub-env's specs fit preallocated buffers (fixed shapes, tensors only)."""
    for spec in (meta.observation, meta.action, meta.reward, meta.done, meta.state):
        for key in spec.keys(True, True):
            leaf = spec[key]
            if isinstance(leaf, NonTensor) or any(int(d) < 0 for d in leaf.shape):
                return False
    return True


def step_items(tensordict: TensorDictBase, n: int) -> list[TensorDictBase | None]:
    """Row ``i`` of ``tensordict`` for each sub-env, ``None`` where ``"_step"`` skips it."""
    mask = tensordict.get("_step", None)
    rows: list[TensorDictBase | None] = []
    for i in range(n):
        if mask is not None and not bool(mask[i].any()):
            rows.append(None)
            continue
        row = tensordict[i].exclude("next", "_step")
        if mask is not None and not bool(mask[i].all()):
            row.set("_step", mask[i].clone())
        rows.append(row)
    return rows


def reset_items(tensordict: TensorDictBase | None, n: int) -> list[Any]:
    """For each sub-env: :data:`KEEP`, ``None`` (full reset) or its ``"_reset"`` input."""
    mask = None if tensordict is None else tensordict.get("_reset", None)
    items: list[Any] = []
    for i in range(n):
        if mask is None or bool(mask[i].all()):
            items.append(None)
        elif not bool(mask[i].any()):
            items.append(KEEP)
        else:
            items.append(tensordict[i].select("_reset"))
    return items


def keep_rows(
    outs: list[TensorDictBase | None],
    rows: list[TensorDictBase | None],
    tensordict: TensorDictBase | None,
) -> list[TensorDictBase | None]:
    """The root rows after a reset: the new outputs, and for the sub-envs not reset their
    last reset row updated with the input's current values (non-tensor entries too)."""
    kept: list[TensorDictBase | None] = []
    for i, out in enumerate(outs):
        if out is not None or rows[i] is None or tensordict is None:
            kept.append(out if out is not None else rows[i])
            continue
        row = rows[i].clone()
        row.update(tensordict[i].select(*row.keys(True), strict=False))  # non-tensors too
        kept.append(row)
    return kept


def stack_rows(
    outs: list[TensorDictBase | None], fallback: list[TensorDictBase | None]
) -> TensorDictBase:
    """Stacks the rows; a ``None`` row (not stepped / not reset) takes ``fallback[i]``."""
    rows = [out if out is not None else fallback[i] for i, out in enumerate(outs)]
    if any(row is None for row in rows):  # pragma: no cover - reset fills every row first
        raise RuntimeError("a batched env was stepped before its first reset.")
    return LazyStackedTensorDict.maybe_dense_stack(rows, 0)


def skip_rows(
    env: Any, tensordict: TensorDictBase, items: list[TensorDictBase | None]
) -> list[TensorDictBase | None]:
    """The ``"next"`` rows of the sub-envs a partial step skips (``None`` in ``items``)."""
    if all(item is not None for item in items):
        return [None] * len(items)
    skip = env.skip_tensordict(tensordict)
    return [skip[i] if item is None else None for i, item in enumerate(items)]
