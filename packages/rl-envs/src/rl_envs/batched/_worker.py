"""The sub-env group (used in-process by SerialEnv) and the worker loop of ParallelEnv.

A group owns ``k`` sub-envs and the rows ``first .. first + k - 1`` of the
exchange buffers. It reads its inputs from views of ``buffers.inputs`` and
writes its outputs into views of ``buffers.next`` / ``buffers.reset`` with
``copy_``: nothing is allocated, stacked or pickled per step.

Worker protocol (one duplex pipe per worker, one-byte commands, replies
``b"k"`` or ``b"e" + traceback``): ``s`` step, ``p`` step the sub-envs flagged in
``buffers.step_mask`` (a partial step), ``r`` reset (the rows flagged in
``inputs["_reset"]``), ``d<seed>`` seed sub-env ``j`` with ``seed + first + j``,
``c`` close. Without buffers (``use_buffers=False``): ``S`` / ``R`` + pickled inputs step /
reset the sub-envs and reply ``b"k"`` + the pickled outputs. Exact state (not per step, so pickled): ``g`` replies
``b"k" + pickle([state of each sub-env])``, ``t + pickle([states])`` restores them;
their failures reply ``b"n" + pickle((not_implemented, message))`` and leave the
worker running. A worker also exits when its parent process disappears, even while blocked
in a sub-env's code (see ``_procwatch.die_with_parent``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import traceback
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.batched._gym_step import gym_stepper
from rl_envs.batched._layout import Buffers, NestedKey, check_sub_env
from rl_envs.batched._procwatch import die_with_parent

KEEP = "keep"  # reset_unbuffered: this sub-env is not reset


class EnvGroup:
    """``k`` sub-envs stepping into rows ``first:first + k`` of shared buffers."""

    def __init__(self, envs: list[Any], buffers: Buffers | None, first: int) -> None:
        for env in envs:
            check_sub_env(env)
        self.envs = envs
        self.first = first
        if buffers is None:  # use_buffers=False: TensorDicts go in and out (see *_unbuffered)
            return
        self.buffers = buffers
        rows = range(first, first + len(envs))
        self.inputs = [buffers.inputs[i] for i in rows]
        self.next_dst = [_dst(buffers.next, buffers.next_keys, i) for i in rows]
        self.reset_dst = [_dst(buffers.reset, buffers.reset_keys, i) for i in rows]
        self.reset_masks = [buffers.inputs.get("_reset")[i] for i in rows]
        self.allow = buffers.inputs.get("_reset")[first : first + len(envs)].numpy()
        self.steppers = [
            gym_stepper(env, td_in, dst)
            for env, td_in, dst in zip(envs, self.inputs, self.next_dst, strict=True)
        ]

    def step(self) -> None:
        for env, td_in, dst, fast in zip(
            self.envs, self.inputs, self.next_dst, self.steppers, strict=True
        ):
            if fast is not None:
                fast.step()
            else:
                _copy_into(dst, _step_one(env, td_in), type(env).__name__)

    def step_partial(self) -> None:
        """Steps the sub-envs flagged in ``buffers.step_mask`` (a partial step)."""
        masks = self.buffers.step_mask[self.first : self.first + len(self.envs)]
        for env, td_in, dst, fast, mask in zip(
            self.envs, self.inputs, self.next_dst, self.steppers, masks, strict=True
        ):
            if not bool(mask.any()):
                continue
            if env.batch_size and not bool(mask.all()):
                td = td_in.clone(False).set("_step", mask.clone())
                _copy_into(dst, _step_one(env, td), type(env).__name__)
            elif fast is not None:
                fast.step()
            else:
                _copy_into(dst, _step_one(env, td_in), type(env).__name__)

    def step_reset(self) -> None:
        """Steps every sub-env; resets those that are done if ``"_reset"`` allows it."""
        for j, (env, td_in, dst, rdst, fast) in enumerate(
            zip(self.envs, self.inputs, self.next_dst, self.reset_dst, self.steppers, strict=True)
        ):
            if fast is not None:
                if fast.step() and self.allow[j].any():
                    _copy_into(rdst, env.reset(), type(env).__name__, missing_ok=True)
                continue
            out = _step_one(env, td_in)
            _copy_into(dst, out, type(env).__name__)
            done = out.get("done")  # the fast loop runs only with a root "done" (_fast.supports)
            if not self.allow[j].any() or not bool(done.any()):
                continue
            if env.batch_size and not bool(done.all()):
                prev = out.clone(False)
                prev.set("_reset", done)
                fresh = env.reset(prev)
            else:
                fresh = env.reset()
            _copy_into(rdst, fresh, type(env).__name__, missing_ok=True)

    def reset(self) -> None:
        for env, td_in, dst, mask in zip(
            self.envs, self.inputs, self.reset_dst, self.reset_masks, strict=True
        ):
            if not bool(mask.any()):
                continue
            if env.batch_size and not bool(mask.all()):
                out = env.reset(td_in.select("_reset"))
            else:
                out = env.reset()
            _copy_into(dst, out, type(env).__name__, missing_ok=True)

    def step_unbuffered(self, tds: list[TensorDictBase | None]) -> list[TensorDictBase | None]:
        """Steps sub-env ``j`` with ``tds[j]`` (``None``: not stepped); returns the outputs."""
        return [
            None if td is None else _step_one(env, td)
            for env, td in zip(self.envs, tds, strict=True)
        ]

    def reset_unbuffered(self, items: list[Any]) -> list[TensorDictBase | None]:
        """Resets sub-env ``j`` as ``items[j]`` says: :data:`KEEP` (not reset, ``None`` out),
        ``None`` (a full reset) or a TensorDict with ``"_reset"`` (a partial one)."""
        return [
            None if isinstance(item, str) else env.reset(item)  # KEEP (pickled: not `is`)
            for env, item in zip(self.envs, items, strict=True)
        ]

    def seed(self, seed: int | None, static_seed: bool) -> None:
        for j, env in enumerate(self.envs):
            if seed is None:
                env.set_seed(None)
            else:
                env.set_seed(seed if static_seed else seed + self.first + j, static_seed=True)

    def get_state(self) -> list[dict[str, Any]]:
        """The exact state of each sub-env (``env.get_state()``), in row order."""
        return [env.get_state() for env in self.envs]

    def set_state(self, states: list[dict[str, Any]]) -> None:
        """Restores one :meth:`get_state` entry into each sub-env."""
        if len(states) != len(self.envs):
            raise ValueError(
                f"got {len(states)} sub-env states for the {len(self.envs)} sub-envs of rows "
                f"{self.first}..{self.first + len(self.envs) - 1}."
            )
        for env, state in zip(self.envs, states, strict=True):
            env.set_state(state)

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _step_one(env: Any, td_in: TensorDictBase) -> TensorDictBase:
    out = env._step(td_in)
    if (
        out.get("done", None) is None
        or out.get("terminated", None) is None
        or out.get("truncated", None) is None
    ):
        env._fill_missing_done(out, reset=False)
    return out


def _dst(buffer: TensorDictBase, keys: list[NestedKey], row: int) -> list[tuple[NestedKey, Any]]:
    return [(key, buffer.get(key)[row]) for key in keys]


def _copy_into(
    dst: list[tuple[NestedKey, torch.Tensor]],
    out: TensorDictBase,
    owner: str,
    missing_ok: bool = False,
) -> None:
    for key, view in dst:
        value = out.get(key, None)
        if value is None:
            if missing_ok:
                continue
            raise KeyError(
                f"{owner} did not write {key!r}, which its specs declare (wrote: "
                f"{sorted(out.keys(True, True), key=str)})."
            )
        if value.requires_grad:  # buffers carry data, not graphs (a sub-env's module output)
            value = value.detach()
        view.copy_(value)


def build_group(
    fns: list[Callable[..., Any]],
    kwargs: list[dict[str, Any]],
    buffers: Buffers | None,
    first: int,
) -> EnvGroup:
    return EnvGroup([fn(**kw) for fn, kw in zip(fns, kwargs, strict=True)], buffers, first)


def worker_loop(
    conn: Any,
    fns: Any,
    kwargs: list[dict[str, Any]],
    buffers: Buffers | None,
    first: int,
    parent_pid: int,
    num_threads: int,
    pdeathsig: bool = True,
) -> None:
    """Runs in the worker process until ``c`` (close), a broken pipe or the parent's death."""
    die_with_parent(parent_pid, pdeathsig)
    torch.set_num_threads(num_threads)
    if isinstance(fns, bytes):
        import cloudpickle

        fns = cloudpickle.loads(fns)
    group = None
    try:
        group = build_group(fns, kwargs, buffers, first)
        conn.send_bytes(b"k")
    except Exception:
        _reply_error(conn, "building the sub-envs")
        return
    try:
        while True:
            try:
                cmd = conn.recv_bytes()
            except (EOFError, OSError):
                return
            op = cmd[:1]
            if op in (b"g", b"t"):
                _state_command(conn, group, cmd)
                continue
            if op in (b"S", b"R"):
                _data_command(conn, group, cmd)
                continue
            try:
                if op == b"s":
                    group.step()
                elif op == b"p":
                    group.step_partial()
                elif op == b"a":
                    group.step_reset()
                elif op == b"r":
                    group.reset()
                elif op == b"d":
                    arg = cmd[2:].decode()
                    group.seed(None if arg == "None" else int(arg), cmd[1:2] == b"1")
                elif op == b"c":
                    conn.send_bytes(b"k")
                    return
                else:
                    raise RuntimeError(f"unknown worker command {cmd!r}")
                conn.send_bytes(b"k")
            except Exception:
                _reply_error(
                    conn,
                    {b"s": "step", b"p": "step", b"r": "reset", b"d": "set_seed"}.get(cmd[:1], "?"),
                )
    finally:
        if group is not None:
            with contextlib.suppress(Exception):  # closing is best effort in a dying worker
                group.close()


def _state_command(conn: Any, group: EnvGroup, cmd: bytes) -> None:
    """``g`` (get the sub-envs' states) or ``t`` (set them); failures keep the worker up."""
    try:
        if cmd[:1] == b"g":
            reply = b"k" + pickle.dumps(group.get_state())
        else:
            group.set_state(pickle.loads(cmd[1:]))
            reply = b"k"
    except Exception as exc:
        message = f"in worker pid {os.getpid()}:\n{traceback.format_exc()}"
        reply = b"n" + pickle.dumps((isinstance(exc, NotImplementedError), message))
    with contextlib.suppress(BrokenPipeError, OSError):
        conn.send_bytes(reply)


def _data_command(conn: Any, group: EnvGroup, cmd: bytes) -> None:
    """``S`` / ``R`` + pickled inputs (``use_buffers=False``): replies ``b"k"`` + the
    pickled outputs of :meth:`EnvGroup.step_unbuffered` / :meth:`EnvGroup.reset_unbuffered`."""
    try:
        items = pickle.loads(cmd[1:])
        outs = group.step_unbuffered(items) if cmd[:1] == b"S" else group.reset_unbuffered(items)
        reply = b"k" + pickle.dumps(outs)
    except Exception:
        _reply_error(conn, "step" if cmd[:1] == b"S" else "reset")
        return
    with contextlib.suppress(BrokenPipeError, OSError):
        conn.send_bytes(reply)


def _reply_error(conn: Any, what: str) -> None:
    message = f"during {what} in worker pid {os.getpid()}:\n{traceback.format_exc()}"
    with contextlib.suppress(BrokenPipeError, OSError):
        conn.send_bytes(b"e" + message.encode())
