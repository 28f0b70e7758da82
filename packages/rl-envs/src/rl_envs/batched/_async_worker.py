"""The worker side of ``AsyncEnvPool``: one env served through an inbox and a shared outbox.

Each worker (a thread or a process) builds its env, sends ``("meta", i, SubEnvMeta)``
(or ``("error", i, traceback)``) and then serves commands from its own inbox:
``(kind, tensordict)`` with ``kind`` one of ``"step"``, ``"reset"``,
``"step_and_maybe_reset"``, ``"seed"`` runs ``env.step`` / ``env.reset`` /
``env.step_and_maybe_reset`` / ``env.set_seed``
and puts ``(kind, i, result)`` (or ``("error", i, traceback)``) on the outbox, which all
workers share; ``("close", None)`` closes the env and ends the worker. A process worker
also ends when its parent process disappears. Between processes every message crosses as
``pickle`` bytes (:func:`pack`): a multiprocessing queue would otherwise move each tensor
to shared memory, which costs far more than copying small tensors.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import threading
import traceback
from collections.abc import Callable
from typing import Any

from rl_envs.batched._layout import read_meta
from rl_envs.batched._procwatch import die_with_parent
from rl_envs.env_base import EnvBase

_POLL_S = 1.0
KINDS = ("step", "reset", "step_and_maybe_reset")


def serve(
    index: int,
    maker: Any,
    kwargs: dict[str, Any],
    inbox: Any,
    outbox: Any,
    parent_pid: int | None,
    pdeathsig: bool = True,
) -> None:
    """Builds env ``index`` and answers its commands until ``"close"`` (the worker loop).

    ``parent_pid`` is set for a process worker: its messages are then pickled bytes, and it
    dies with that process even when blocked in the env's code (``pdeathsig``: also through
    ``PR_SET_PDEATHSIG``, only sound when the pool was built on the main thread).
    """
    binary = parent_pid is not None
    if binary:
        die_with_parent(parent_pid, pdeathsig)
    try:
        env = maker if isinstance(maker, EnvBase) else maker(**kwargs)
        outbox.put(pack(("meta", index, read_meta(env)), binary))
    except Exception:
        outbox.put(pack(("error", index, traceback.format_exc()), binary))
        return
    calls: dict[str, Callable[[Any], Any]] = {
        "step": env.step,
        "reset": env.reset,
        "step_and_maybe_reset": env.step_and_maybe_reset,
        "seed": env.set_seed,
    }
    while True:
        try:
            kind, data = unpack(inbox.get(timeout=_POLL_S))
        except queue.Empty:
            if parent_pid is not None and os.getppid() != parent_pid:
                break  # the pool's process is gone
            continue
        if kind == "close":
            break
        try:
            outbox.put(pack((kind, index, calls[kind](data)), binary))
        except Exception:
            outbox.put(pack(("error", index, traceback.format_exc()), binary))
    with contextlib.suppress(Exception):
        env.close()
    if binary:  # results nobody will read must not keep the process alive at exit
        outbox.cancel_join_thread()


def pack(message: tuple[Any, ...], binary: bool) -> Any:
    """``message`` as sent: pickled bytes between processes, the tuple between threads."""
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL) if binary else message


def unpack(message: Any) -> tuple[Any, ...]:
    """The tuple :func:`pack` made."""
    return pickle.loads(message) if isinstance(message, bytes) else message


def start_threads(
    makers: list[Any], kwargs: list[dict[str, Any]]
) -> tuple[list[Any], list[Any], Any]:
    """Starts one daemon thread per env; returns (workers, inboxes, outbox)."""
    outbox: queue.Queue = queue.Queue()
    inboxes = [queue.Queue() for _ in makers]
    workers = []
    for i, (maker, kw) in enumerate(zip(makers, kwargs, strict=True)):
        thread = threading.Thread(
            target=serve,
            args=(i, maker, kw, inboxes[i], outbox, None),
            daemon=True,
            name=f"AsyncEnvPool-worker-{i}",
        )
        thread.start()
        workers.append(thread)
    return workers, inboxes, outbox


def start_processes(
    makers: list[Any], kwargs: list[dict[str, Any]], start_method: str
) -> tuple[list[Any], list[Any], Any]:
    """Starts one daemon process per env; returns (workers, inboxes, outbox)."""
    import multiprocessing as mp

    ctx = mp.get_context(start_method)
    # The kernel's parent-death signal follows the parent *thread*: only from the main one.
    pdeathsig = threading.current_thread() is threading.main_thread()
    outbox = ctx.Queue()
    inboxes = [ctx.Queue() for _ in makers]
    workers = []
    for i, (maker, kw) in enumerate(zip(makers, kwargs, strict=True)):
        proc = ctx.Process(
            target=serve,
            args=(i, maker, kw, inboxes[i], outbox, os.getpid(), pdeathsig),
            daemon=True,
            name=f"AsyncEnvPool-worker-{i}",
        )
        proc.start()
        workers.append(proc)
    return workers, inboxes, outbox


def stop(workers: list[Any], inboxes: list[Any], timeout: float = 5.0) -> None:
    """Asks every worker to close its env and waits for it (a process is killed if stuck)."""
    for inbox in inboxes:
        with contextlib.suppress(Exception):
            inbox.put(pack(("close", None), binary=False))
    for worker in workers:
        worker.join(timeout)
        if hasattr(worker, "kill") and worker.is_alive():
            worker.kill()
            worker.join(timeout)
