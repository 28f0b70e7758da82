"""Process faults of worker processes: die with the parent, describe a worker that is silent.

(rl-envs has its own copy: packages never import each other.)

A worker calls :func:`die_with_parent` first. On Linux it asks the kernel for ``SIGKILL``
when its parent goes (``prctl(PR_SET_PDEATHSIG)``), then checks that the parent has not
already gone (the race between ``fork`` and ``prctl``). Everywhere it starts a daemon
watchdog thread that ends the process once it is re-parented or its owner has exited:
the portable fallback, also for workers blocked in user code that never read their pipe.

The parent uses :func:`describe_process` to say what a worker that missed its timeout is
doing (stopped by ``SIGSTOP``, sleeping, running...) and :func:`check_timeout` to read a
``timeout=`` argument.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1
_WATCH_S = 0.5
_STATES = {
    "R": "is running (busy in Python or native code)",
    "S": "is sleeping (blocked on a lock, a socket, a pipe or time.sleep)",
    "D": "is in uninterruptible sleep (blocked in the kernel, e.g. disk or GPU I/O)",
    "T": "is stopped (SIGSTOP; `kill -CONT <pid>` resumes it)",
    "t": "is stopped by a debugger (tracing stop)",
    "Z": "has exited (a zombie not yet reaped)",
    "X": "has exited",
}


def check_timeout(timeout: float | None, owner: str) -> float:
    """``timeout`` as a positive float (``math.inf``: wait forever, explicitly).

    Raises:
        ValueError: ``None``, a non-number, zero or a negative number.
    """
    if timeout is None:
        raise ValueError(
            f"{owner}(timeout=None): a None timeout would wait on a stuck worker forever. Pass "
            "a number of seconds, or timeout=math.inf to wait forever explicitly."
        )
    try:
        value = float(timeout)
    except (TypeError, ValueError):
        raise ValueError(
            f"{owner}(timeout={timeout!r}): expected a number of seconds (or math.inf)."
        ) from None
    if not value > 0:
        raise ValueError(f"{owner}(timeout={timeout!r}): expected a positive number of seconds.")
    return value


def poll_ms(deadline: float) -> float | None:
    """Milliseconds left until ``deadline`` (``time.monotonic()`` based) for ``select.poll``;
    ``None`` (wait forever) for an infinite deadline."""
    if math.isinf(deadline):
        return None
    return max(0.0, (deadline - time.monotonic()) * 1000.0)


def process_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` from ``/proc/<pid>/stat`` (``"X"`` once it is gone),
    or ``None`` where ``/proc`` does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return "X" if os.path.isdir("/proc/self") else None
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def describe_process(pid: int | None) -> str:
    """What ``pid`` is doing, in words (``"is stopped (SIGSTOP; ...)"``, ``"is sleeping ..."``)."""
    if pid is None:
        return "has not started"
    state = process_state(pid)
    if state is None:
        return "is alive (its state is unknown on this platform)"
    return _STATES.get(state, f"is in state {state!r}")


def _alive(pid: int) -> bool:
    state = process_state(pid)
    if state is not None:
        return state not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _set_pdeathsig() -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def die_with_parent(owner_pid: int, pdeathsig: bool = True) -> None:
    """Make this worker process end when the process that owns it ends.

    Args:
        owner_pid: the pid of the process that started this worker (its parent, or the
            client of the forkserver that forked it).
        pdeathsig: also use ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (Linux). The kernel sends
            it when the parent *thread* exits, so the parent passes ``False`` when it starts
            the worker from a thread other than its main one (the watchdog still runs).
    """
    parent = os.getppid()
    if pdeathsig:
        _set_pdeathsig()
    if os.getppid() != parent or not _alive(owner_pid):
        os._exit(1)  # the owner went before prctl took effect: nobody will ever talk to us
    threading.Thread(
        target=_watch, args=(owner_pid, parent), daemon=True, name="parent-watchdog"
    ).start()


def _watch(owner_pid: int, parent: int) -> None:
    while True:
        time.sleep(_WATCH_S)
        if os.getppid() != parent or not _alive(owner_pid):
            os._exit(1)  # orphaned (e.g. the owner was SIGKILLed): end, whatever we were doing
