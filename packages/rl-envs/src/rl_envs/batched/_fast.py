"""The rollout loop of SerialEnv / ParallelEnv with random actions (private).

The generic loop builds a TensorDict per step (``step``, ``step_mdp``, a partial
``reset`` round trip when a sub-env finishes) and stacks them at the end. Here
the output ``[*B, T]`` is allocated once, every step is one command to the
sub-env groups that steps them *and* resets the finished ones (``step_reset``),
and each entry moves with one ``copy_`` per key:

1. the root of step t (observations, flags, states) and the action are written
   into column t of the output; actions and states into the input buffer;
2. the groups step (and reset the finished sub-envs) into the ``next`` and
   ``reset`` buffers;
3. ``next`` goes into column t of the output's ``"next"``; the root of step
   t + 1 is ``reset`` where the sub-env finished, ``next`` elsewhere.

Actions are drawn up front by ``rollout`` and shared with the generic loop, so
both loops give the same result for the same seeds. ``SerialEnv`` and ``ParallelEnv``
offer this loop as their ``"batched"`` rollout backend (:func:`supports`, :func:`run`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs.batched._layout import Buffers


def supports(buffers: Buffers, root: TensorDictBase, policy: Any, mode: str) -> bool:
    """Random actions, mode ``"none"`` or ``"any"``, a root ``"done"`` flag, and a root
    holding only entries the sub-envs' reset writes (anything else, e.g. a policy's
    state, is not carried here)."""
    if policy is not None or mode not in ("none", "any") or "done" not in buffers.next_keys:
        return False  # (a root "done" flag drives this loop's resets)
    return not set(root.keys(True, True)) - set(buffers.reset_keys)


def run(
    env: Any,
    buffers: Buffers,
    step_reset: Callable[[], None],
    root: TensorDictBase,
    actions: dict[Any, torch.Tensor],
    mode: str,
) -> TensorDictBase:
    """The stacked rollout ``[*B, T]`` (``T = len(actions)`` unless a done stops it)."""
    root_keys = list(buffers.reset_keys)
    action_keys = list(actions)
    max_steps = next(iter(actions.values())).shape[0]
    nb = len(env.batch_size)
    t_dim = nb

    def column(x: torch.Tensor, t: int) -> torch.Tensor:
        return x.select(t_dim, t)

    out_root = {
        k: torch.empty(
            (*root.get(k).shape[:nb], max_steps, *root.get(k).shape[nb:]),
            dtype=root.get(k).dtype,
            device=root.device,
        )
        for k in root_keys
    }
    for k in action_keys:
        a = actions[k]
        out_root[k] = torch.empty(
            (*a.shape[1 : 1 + nb], max_steps, *a.shape[1 + nb :]), dtype=a.dtype
        )
    nxt_buf = buffers.next
    out_next = {
        k: torch.empty((*v.shape[:nb], max_steps, *v.shape[nb:]), dtype=v.dtype, device=v.device)
        for k, v in nxt_buf.items(True, True)
    }
    inputs = buffers.inputs
    state_keys = [k for k in buffers.input_keys if k not in set(action_keys)]
    current = {k: root.get(k) for k in root_keys}
    done_next = nxt_buf.get("done")
    reset_buf = buffers.reset
    steps = max_steps
    for t in range(max_steps):
        for k in root_keys:
            column(out_root[k], t).copy_(current[k])
        for k in action_keys:
            a = actions[k][t]
            column(out_root[k], t).copy_(a)
            inputs.get(k).copy_(a)
        for k in state_keys:
            inputs.get(k).copy_(current[k])
        last = t == max_steps - 1
        reset_buf_mask = inputs.get("_reset")
        reset_buf_mask.fill_(not last and mode == "none")
        step_reset()
        for k, v in out_next.items():
            column(v, t).copy_(nxt_buf.get(k))
        if last:
            break
        done = done_next.clone()
        if mode == "any" and bool(done.any()):
            steps = t + 1
            break
        any_done = bool(done.any())
        new = {}
        for k in root_keys:
            nv = nxt_buf.get(k, None)
            base = nv if nv is not None else current[k]
            if any_done:
                m = done.reshape(*done.shape[:nb], *[1] * (base.ndim - nb))
                new[k] = torch.where(m, reset_buf.get(k), base)
            else:
                new[k] = base.clone()
        current = new
    batch = (*env.batch_size, max_steps)
    result = TensorDict(batch_size=batch, device=env.device)
    for k, v in out_root.items():
        _add_parents(result, (), k, root if k in root_keys else buffers.inputs, nb, max_steps)
        result.set(k, v)
    for k, v in out_next.items():
        _add_parents(result, ("next",), k, nxt_buf, nb, max_steps)
        result.set(("next", *(k if isinstance(k, tuple) else (k,))), v)
    if steps < max_steps:
        result = result[(slice(None),) * nb + (slice(0, steps),)]
    return result


def _add_parents(
    result: TensorDictBase, at: tuple[str, ...], key: Any, source: TensorDictBase, nb: int, t: int
) -> None:
    """Gives the sub-TensorDicts above ``key`` the batch size of ``source``'s, with the time
    dim inserted after the ``nb`` env dims (a nested ``[*B, 5]`` group stays ``[*B, T, 5]``)."""
    if not isinstance(key, tuple):
        return
    for depth in range(1, len(key)):
        prefix = key[:depth]
        if result.get((*at, *prefix), None) is not None:
            continue
        sub = source.get(prefix, None)
        bs = getattr(sub, "batch_size", None)
        if bs is None or len(bs) <= nb:
            return  # no extra dims: set() creates it with the parent's batch size
        shape = (*bs[:nb], t, *bs[nb:])
        result.set((*at, *prefix), TensorDict(batch_size=shape, device=result.device))
