"""``ParallelEnv``: envs stepped in worker processes through shared memory."""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch.multiprocessing as mp
from tensordict import TensorDictBase

from rl_envs.batched import _fast
from rl_envs.batched._layout import (
    Buffers,
    as_fn_list,
    as_kwargs_list,
    fill_skipped,
    make_buffers,
    read_meta,
    set_batched_specs,
    write_inputs,
)
from rl_envs.batched._procwatch import check_timeout, describe_process, poll_ms, process_state
from rl_envs.batched._unbuffered import (
    keep_rows,
    reset_items,
    skip_rows,
    stack_rows,
    step_items,
    wants_buffers,
)
from rl_envs.batched._view import RowView, make_view, refuse_writeback
from rl_envs.batched._worker import worker_loop
from rl_envs.batched.serial import SerialEnv
from rl_envs.env_base import EnvBase
from rl_envs.rollout_backend import RolloutBackend
from rl_envs.utils import EnvMetaData

__all__ = ["ParallelEnv", "WorkerError", "WorkerTimeoutError"]

_JOIN_TIMEOUT_S = 5.0
DEFAULT_TIMEOUT_S = 300.0
# The keyword arguments a SerialEnv takes too (serial_for_single passes them on).
_SERIAL_KWARGS = frozenset(
    {
        "create_env_kwargs",
        "device",
        "validate_actions",
        "use_buffers",
        "share_individual_td",
        "consolidate",
    }
)


class WorkerError(RuntimeError):
    """A worker raised or died; the message holds its traceback or exit status."""


class WorkerTimeoutError(WorkerError, TimeoutError):
    """A worker did not answer within the env's ``timeout``; the message names the worker,
    its pid, what it was asked to do and what the process is doing (e.g. stopped)."""


class ParallelEnv(EnvBase):
    """Envs stepped in ``num_workers`` processes, as one env of batch ``[N * k, *sub_batch]``.

    Each worker builds ``envs_per_worker`` (``k``) sub-envs and steps them in
    sequence; row ``i * k + j`` of the batch is sub-env ``j`` of worker ``i``.
    Actions, observations, rewards and done flags travel through TensorDicts in
    shared memory, allocated once: a step writes the actions (one ``copy_`` per
    key), sends one byte to each worker, waits for one byte back and returns a
    copy of the outputs. Nothing is pickled per step.

    Workers start on first use (``reset``, ``step``, ``set_seed``) and are
    stopped by ``close()`` (idempotent; also on garbage collection and at the
    end of a ``with`` block). If a worker raises, the parent raises
    :class:`WorkerError` with the worker's traceback; if a worker dies (e.g.
    killed by a signal), the parent raises within a second instead of hanging; if a
    worker does not answer within ``timeout`` seconds (blocked in ``_step``, stopped by
    ``SIGSTOP``), the parent raises :class:`WorkerTimeoutError` naming the worker, its pid,
    the command (``"step"``, ``"reset"``...) and what the process is doing. Either way
    every worker is stopped and reaped first: no orphan, no zombie. Workers also end when
    the parent process dies, even while blocked in a sub-env's code (``PR_SET_PDEATHSIG``
    on Linux, and a watchdog thread everywhere).

    ``get_state()`` / ``set_state()`` save and restore the exact state of every
    sub-env (through the workers, in the format of :class:`SerialEnv`'s), so a
    restored ParallelEnv continues bit for bit.

    Lambdas and closures work with ``mp_start_method="fork"`` (the default
    on Linux); with ``"spawn"`` the callables are sent with cloudpickle when it
    is installed (wrap them in ``EnvCreator`` for clarity), otherwise they must
    be picklable.

    Args:
        num_workers: number of processes.
        create_env_fn: a callable returning an env, or one per worker.
        create_env_kwargs: keyword arguments for it (a dict, or one per worker).
        serial_for_single: with ``num_workers=1``, build a :class:`SerialEnv` instead (no
            process; TorchRL's flag). ``ParallelEnv(1, f, serial_for_single=True)`` is then
            not a ``ParallelEnv``.
        envs_per_worker: sub-envs built and stepped by each worker.
        mp_start_method: ``"fork"``, ``"spawn"`` or ``"forkserver"`` (default:
            ``"fork"`` where available, else ``"spawn"``).
        num_threads: torch threads per worker (default 1).
        device: must be the sub-envs' device (kept for TorchRL parity).
        validate_actions: see :class:`~rl_envs.EnvBase`.
        use_buffers: shared-memory buffers (``True``) or pickled TensorDicts through
            the pipes, stacked lazily where the rows differ (``False``: for
            observations that change shape or non-tensor data). Default: buffers
            unless a spec has a ``-1`` dim or is ``NonTensor`` (such specs never use
            buffers).
        share_individual_td: TorchRL's choice between one stacked buffer and one buffer
            per sub-env. Results are the same either way; here the buffers are always
            one TensorDict per exchange (rows are the sub-envs), so it is recorded only.
        consolidate: TorchRL's choice to pack TensorDicts into one buffer before sending them
            between processes; here data crosses through preallocated buffers (or pickled
            rows), so it is recorded only.
        timeout: seconds the parent waits for the workers' answer to one command (a step,
            a reset, building the sub-envs...) before raising :class:`WorkerTimeoutError`
            (default 300). ``math.inf`` waits forever; ``None`` is refused, so that waiting
            forever is always a visible choice.

    Raises:
        ValueError: ``timeout`` is ``None``, zero or negative.

    Example:
        >>> from rl_envs import PendulumEnv, ParallelEnv
        >>> with ParallelEnv(2, PendulumEnv, envs_per_worker=2) as env:
        ...     env.set_seed(0)
        ...     env.rollout(5).batch_size
        4
        torch.Size([4, 5])
    """

    def __new__(cls, *args: Any, serial_for_single: bool = False, **kwargs: Any) -> Any:
        # TorchRL's serial_for_single: one worker runs in this process, as a SerialEnv
        # (Python then skips ParallelEnv.__init__, the object not being a ParallelEnv)
        num_workers = args[0] if args else kwargs.get("num_workers")
        if serial_for_single and num_workers == 1:
            serial_kwargs = {k: v for k, v in kwargs.items() if k in _SERIAL_KWARGS}
            return SerialEnv(*args[:3], **serial_kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        num_workers: int,
        create_env_fn: Callable[..., Any] | Sequence[Callable[..., Any]],
        create_env_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        *,
        serial_for_single: bool = False,
        envs_per_worker: int = 1,
        mp_start_method: str | None = None,
        num_threads: int = 1,
        device: Any = None,
        validate_actions: bool = False,
        use_buffers: bool | None = None,
        share_individual_td: bool | None = None,
        consolidate: bool = True,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.timeout = check_timeout(timeout, "ParallelEnv")
        if envs_per_worker < 1:
            raise ValueError(f"envs_per_worker must be >= 1, got {envs_per_worker}.")
        fns = as_fn_list(create_env_fn, num_workers)
        kwargs = as_kwargs_list(create_env_kwargs, num_workers)
        meta_source = fns[0]
        meta = getattr(meta_source, "meta_data", None)
        if isinstance(meta, EnvMetaData):
            from rl_envs.batched._layout import SubEnvMeta

            meta = SubEnvMeta(
                observation=meta["full_observation_spec"].clone(),
                action=meta["full_action_spec"].clone(),
                reward=meta["full_reward_spec"].clone(),
                done=meta["full_done_spec"].clone(),
                state=meta["full_state_spec"].clone(),
                batch_size=meta.batch_size,
                device=meta.device,
            )
            if kwargs[0]:
                meta = None  # the creator's meta data may not match these kwargs
        if not hasattr(meta, "observation"):
            probe = meta_source(**kwargs[0])
            try:
                meta = read_meta(probe)
            finally:
                probe.close()
        if device is not None and str(device) != str(meta.device):
            raise ValueError(
                f"ParallelEnv(device={device!r}) but the sub-envs live on {meta.device}."
            )
        n = num_workers * envs_per_worker
        super().__init__(
            device=meta.device,
            batch_size=(n, *meta.batch_size),
            validate_actions=validate_actions,
        )
        self.serial_for_single = serial_for_single
        self._mp_start_method = mp_start_method  # as asked (None: the default below)
        if mp_start_method is None:
            mp_start_method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        self.num_workers = num_workers
        self.envs_per_worker = envs_per_worker
        self.create_env_fn = fns
        self.create_env_kwargs = kwargs
        self.mp_start_method = mp_start_method
        self.num_threads = num_threads
        if meta.device is None:  # sub-env outputs on several devices: no single device
            self._device = None
        set_batched_specs(self, meta, n)
        # buffers only where the specs fit them (fixed shapes, tensors): else TensorDicts
        self.use_buffers = wants_buffers(meta) and use_buffers is not False
        self.share_individual_td = bool(share_individual_td)
        self.consolidate = bool(consolidate)  # TorchRL's IPC packing flag; recorded only
        self._exchange: Buffers | None = (
            make_buffers(self, shared=True) if self.use_buffers else None
        )
        self._rows: list[TensorDictBase | None] = [None] * n  # last reset rows (no buffers)
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._pollers: list[Any] = []  # one select.poll per worker: a cheap wait with a timeout
        self._closed = False
        self._finalizer: Any = None

    # ------------------------------------------------------------ lifecycle
    @property
    def is_started(self) -> bool:
        return bool(self._procs)

    def update_kwargs(self, kwargs: dict[str, Any] | Sequence[dict[str, Any]]) -> None:
        """Updates the sub-envs' keyword arguments; running workers are restarted on next use."""
        updates = as_kwargs_list(kwargs, self.num_workers, name="kwargs")
        for current, update in zip(self.create_env_kwargs, updates, strict=True):
            current.update(update)
        if self.is_started:
            self._finalizer.detach()
            _shutdown(self._procs, self._conns)
            self._procs, self._conns, self._pollers = [], [], []

    def _start(self) -> None:
        if self._closed:
            raise RuntimeError("ParallelEnv is closed: create a new one.")
        _drop_leaked_lazy_legacy_variable()
        ctx = mp.get_context(self.mp_start_method)
        payloads = [self._payload(i) for i in range(self.num_workers)]
        k = self.envs_per_worker
        # PR_SET_PDEATHSIG fires when the forking *thread* exits: only safe from the main one.
        pdeathsig = threading.current_thread() is threading.main_thread()
        for i in range(self.num_workers):
            parent_end, child_end = ctx.Pipe(duplex=True)
            proc = ctx.Process(
                target=worker_loop,
                args=(
                    child_end,
                    payloads[i],
                    [self.create_env_kwargs[i]] * k,
                    self._exchange,
                    i * k,
                    os.getpid(),
                    self.num_threads,
                    pdeathsig,
                ),
                daemon=True,
                name=f"ParallelEnv-worker-{i}",
            )
            proc.start()
            child_end.close()  # the parent keeps only its end: a dead worker reads as EOF
            self._procs.append(proc)
            self._conns.append(parent_end)
            poller = select.poll()
            poller.register(parent_end.fileno(), select.POLLIN)
            self._pollers.append(poller)
        self._finalizer = weakref.finalize(self, _shutdown, self._procs, self._conns)
        self._wait_all("building the sub-envs")

    def _payload(self, i: int) -> Any:
        fns = [self.create_env_fn[i]] * self.envs_per_worker
        if self.mp_start_method == "fork":
            return fns
        try:
            pickle.dumps(fns)
            return fns
        except Exception as exc:
            try:
                import cloudpickle
            except ImportError:
                raise TypeError(
                    f"ParallelEnv(mp_start_method={self.mp_start_method!r}) must pickle "
                    f"create_env_fn ({exc}); install cloudpickle, use a module-level function, "
                    "or use mp_start_method='fork'."
                ) from exc
            return cloudpickle.dumps(fns)

    def __getitem__(self, item: Any) -> ParallelEnv:
        """A live view on the sub-envs ``item`` selects (an int, a slice, an index array).

        The view is a ``ParallelEnv`` of batch ``[len(rows), *sub_batch]``; its resets and steps
        are partial resets / steps of this env (see ``rl_envs.batched._view``).

        Raises:
            NotImplementedError: ``item`` is a boolean mask.
        """
        return make_view(self, item, _ParallelView)

    def __setitem__(self, item: Any, value: Any) -> None:
        refuse_writeback("ParallelEnv")

    def start(self) -> None:
        """Starts the workers now (they otherwise start at the first reset or step)."""
        self._ensure_started()

    def _ensure_started(self) -> None:
        if not self._procs:
            self._start()

    def close(self, *, raise_if_closed: bool = False) -> None:
        """Stops and reaps every worker; calling it again does nothing.

        Args:
            raise_if_closed: raise ``RuntimeError`` instead when it is already closed
                (TorchRL's keyword, whose default is ``True`` there).
        """
        if self._closed:
            if raise_if_closed:
                raise RuntimeError("ParallelEnv: trying to close a closed environment.")
            return
        self._closed = self.is_closed = True
        if self._finalizer is not None:
            self._finalizer()
        else:
            _shutdown(self._procs, self._conns)
        self._procs, self._conns, self._pollers = [], [], []

    def __enter__(self) -> ParallelEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -------------------------------------------------------------- protocol
    def _send_all(self, cmd: bytes, workers: Sequence[int] | None = None) -> list[int]:
        targets = list(range(self.num_workers)) if workers is None else list(workers)
        for i in targets:
            try:
                self._conns[i].send_bytes(cmd)
            except (BrokenPipeError, OSError):
                self._fail(i, "sending a command")
        return targets

    def _wait_all(self, what: str, workers: Sequence[int] | None = None) -> None:
        targets = list(range(self.num_workers)) if workers is None else workers
        deadline = time.monotonic() + self.timeout
        errors = []
        for n, i in enumerate(targets):
            reply = self._recv(i, what, deadline, targets[n:])
            if reply[:1] == b"e":
                errors.append(reply[1:].decode(errors="replace"))
        if errors:
            self._abort()
            raise WorkerError(
                f"ParallelEnv: {len(errors)} worker(s) raised {what}; the env is closed. "
                f"First worker traceback:\n{errors[0]}"
            )

    def _recv(self, i: int, what: str, deadline: float, waiting: Sequence[int]) -> bytes:
        """Worker ``i``'s reply, or :class:`WorkerTimeoutError` past ``deadline`` (``waiting``:
        the workers whose replies are still unread, ``i`` first)."""
        if not self._pollers[i].poll(poll_ms(deadline)):
            self._timed_out(what, [j for j in waiting if j == i or not self._pollers[j].poll(0)])
        try:
            return self._conns[i].recv_bytes()
        except (EOFError, OSError):
            self._fail(i, what)
            raise  # unreachable: _fail raises

    def _timed_out(self, what: str, stuck: Sequence[int]) -> None:
        """Kills the ``stuck`` workers at once (they may never read a command again), stops
        the others, and raises :class:`WorkerTimeoutError` describing each stuck worker."""
        lines = [
            f"worker {i} (pid {self._procs[i].pid}), which {describe_process(self._procs[i].pid)}"
            for i in stuck
        ]
        self._abort(stuck)
        raise WorkerTimeoutError(
            f"ParallelEnv: no answer to {what!r} within timeout={self.timeout} s from "
            f"{'; '.join(lines)}. The env is closed and its workers are stopped. If the "
            "sub-env is just slow, pass a larger ParallelEnv(timeout=...); otherwise find "
            "what blocks its _step / _reset (run it in a SerialEnv to debug)."
        )

    def _fail(self, i: int, what: str) -> None:
        proc = self._procs[i]
        proc.join(timeout=1.0)
        code = proc.exitcode
        if code is not None and code < 0:
            try:
                status = f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                status = f"was killed by signal {-code}"
        elif code is not None:
            status = f"exited with code {code}"
        else:
            status = "closed its pipe"
        pid = proc.pid
        self._abort()
        raise WorkerError(
            f"ParallelEnv worker {i} (pid {pid}) {status} while running {what!r}; the env is closed. "
            "Check the sub-env for crashes (segfault, out of memory) and create a new ParallelEnv."
        )

    def _abort(self, stuck: Sequence[int] = ()) -> None:
        self._closed = self.is_closed = True
        if self._finalizer is not None:
            self._finalizer.detach()
        _shutdown(self._procs, self._conns, stuck)
        self._procs, self._conns, self._pollers = [], [], []

    def _exchange_state(self, cmds: list[bytes], what: str) -> list[bytes]:
        """Sends ``cmds[i]`` to worker ``i``; returns the payloads of their ``b"k"`` replies.

        Every reply is read before raising, so the pipes stay in step. A worker that
        could not do it (``b"n"``) raises here and leaves the env usable.
        """
        if self._closed:
            raise RuntimeError("ParallelEnv is closed: create a new one.")
        self._ensure_started()
        for i, cmd in enumerate(cmds):
            try:
                self._conns[i].send_bytes(cmd)
            except (BrokenPipeError, OSError):
                self._fail(i, what)
        payloads: list[bytes] = []
        failures: list[tuple[bool, str]] = []
        crashed: list[str] = []
        deadline = time.monotonic() + self.timeout
        for i in range(len(cmds)):
            reply = self._recv(i, what, deadline, range(i, len(cmds)))
            if reply[:1] == b"n":
                failures.append(pickle.loads(reply[1:]))
            elif reply[:1] == b"e":
                crashed.append(reply[1:].decode(errors="replace"))
            else:
                payloads.append(reply[1:])
        if crashed:
            self._abort()
            raise WorkerError(
                f"ParallelEnv: a worker failed {what}; the env is closed. Worker traceback:\n"
                f"{crashed[0]}"
            )
        if failures:
            not_implemented, message = failures[0]
            error = NotImplementedError if not_implemented else WorkerError
            raise error(
                f"ParallelEnv.{what}: {len(failures)} worker(s) failed (the env stays open). "
                f"First failure {message}"
            )
        return payloads

    def get_state(self) -> dict[str, Any]:
        """The exact state of every sub-env, in batch-row order (each must implement it).

        Returns:
            ``{"envs": [state of row 0, state of row 1, ...]}``, picklable, the format of
            :meth:`SerialEnv.get_state`. The rollout root and the global torch RNG
            (random actions) are the caller's to save.

        Raises:
            NotImplementedError: a sub-env does not implement ``get_state`` (the message
                holds the worker's traceback and names the env class).
        """
        payloads = self._exchange_state([b"g"] * self.num_workers, "get_state")
        return {"envs": [state for payload in payloads for state in pickle.loads(payload)]}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`get_state` result; the next steps are bit-identical.

        Typically into a fresh ``ParallelEnv`` built like the one that saved it (same
        number of sub-envs; ``num_workers`` / ``envs_per_worker`` may differ).

        Raises:
            ValueError: the state holds another number of sub-envs.
            NotImplementedError: a sub-env does not implement ``set_state``.
        """
        states = state["envs"]
        n, k = self.batch_size[0], self.envs_per_worker
        if len(states) != n:
            raise ValueError(
                f"ParallelEnv.set_state: the state holds {len(states)} sub-envs, this env has "
                f"{n} ({self.num_workers} workers x {k}); restore into a batched env with as "
                "many sub-envs as the one that saved it."
            )
        cmds = [b"t" + pickle.dumps(states[i * k : (i + 1) * k]) for i in range(self.num_workers)]
        self._exchange_state(cmds, "set_state")
        self._awaiting_reset = False  # the restored states are a place to step from

    def _run(self, cmd: bytes, what: str, workers: Sequence[int] | None = None) -> None:
        if self._closed:
            raise RuntimeError("ParallelEnv is closed: create a new one.")
        self._ensure_started()
        targets = self._send_all(cmd, workers)
        self._wait_all(what, targets)

    # ----------------------------------------------------------------- hooks
    def _unbuffered(self, cmd: bytes, items: list[Any]) -> list[TensorDictBase | None]:
        """Sends each worker its sub-envs' items (``S`` / ``R``); returns the outputs by row."""
        k = self.envs_per_worker
        cmds = [cmd + pickle.dumps(items[i * k : (i + 1) * k]) for i in range(self.num_workers)]
        what = "step" if cmd == b"S" else "reset"
        return [
            out for payload in self._exchange_state(cmds, what) for out in pickle.loads(payload)
        ]

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        if self._exchange is None:
            outs = self._unbuffered(b"R", reset_items(tensordict, self.batch_size[0]))
            self._rows = keep_rows(outs, self._rows, tensordict)
            return stack_rows(outs, self._rows)
        mask = tensordict.get("_reset", None) if tensordict is not None else None
        reset_buf = self._exchange.inputs.get("_reset")
        if mask is None:
            reset_buf.fill_(True)
            workers = None
        else:
            reset_buf.copy_(mask.reshape(reset_buf.shape))
            per_worker = reset_buf.reshape(self.num_workers, -1).any(-1)
            workers = per_worker.nonzero().flatten().tolist()
        if workers is None or workers:
            self._run(b"r", "reset", workers)
        return self._exchange.reset.clone()

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._exchange is None:
            items = step_items(tensordict, self.batch_size[0])
            outs = self._unbuffered(b"S", items)
            return stack_rows(outs, skip_rows(self, tensordict, items))
        write_inputs(self._exchange, tensordict, "ParallelEnv")
        mask = tensordict.get("_step", None)
        if mask is None:
            self._run(b"s", "step")
            return self._exchange.next.clone()
        step_mask = self._exchange.step_mask
        step_mask.copy_(mask.reshape(self.batch_size))
        per_worker = step_mask.reshape(self.num_workers, -1).any(-1)
        self._run(b"p", "step", per_worker.nonzero().flatten().tolist())
        return fill_skipped(self, self._exchange.next.clone(), tensordict, mask)

    def _set_seed(self, seed: int | None) -> None:
        self.set_seed(seed)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seeds sub-env ``r`` (row ``r`` of the batch) with ``seed + r``.

        Returns:
            The seed for the next env: ``seed + batch_size[0]`` (``seed`` if static).
        """
        flag = b"1" if static_seed else b"0"
        self._run(b"d" + flag + str(seed).encode(), "set_seed")
        if seed is None or static_seed:
            return seed
        return seed + self.batch_size[0]


def _backend_supports(env: EnvBase, root: TensorDictBase, policy: Any, mode: str) -> bool:
    return (
        type(env) is ParallelEnv
        and env._exchange is not None
        and _fast.supports(env._exchange, root, policy, mode)
    )


def _backend_run(
    env: ParallelEnv,
    root: TensorDictBase,
    max_steps: int,
    policy: Any,
    mode: str,
    actions: dict[Any, Any] | None,
) -> TensorDictBase:
    """One command per step to the sub-envs, one copy per key (see ``batched._fast``)."""
    assert actions is not None  # supports() asked for random actions
    return _fast.run(env, env._exchange, lambda: env._run(b"a", "step"), root, actions, mode)


ParallelEnv.rollout_backends = (RolloutBackend("batched", _backend_supports, _backend_run),)


def _shutdown(procs: list[Any], conns: list[Any], stuck: Sequence[int] = ()) -> None:
    """Asks workers to stop, then terminates / kills the stubborn ones, and reaps all.

    ``stuck`` workers (and stopped ones, which would never read the request) are killed at
    once; the others get ``_JOIN_TIMEOUT_S`` seconds in all to close their sub-envs."""
    stopped = [i for i, p in enumerate(procs) if p.pid and process_state(p.pid) in ("T", "t")]
    for i in {*stuck, *stopped}:
        with contextlib.suppress(OSError, ValueError):
            procs[i].kill()
    for i, conn in enumerate(conns):
        if i not in stuck:
            with contextlib.suppress(BrokenPipeError, OSError):
                conn.send_bytes(b"c")
    deadline = time.monotonic() + _JOIN_TIMEOUT_S
    for proc in procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGCONT)  # a stopped process takes SIGTERM only then
            proc.join(timeout=1.0)
        if proc.is_alive():
            proc.kill()
            proc.join()
    for conn in conns:
        with contextlib.suppress(OSError):
            conn.close()
    procs.clear()
    conns.clear()


def _drop_leaked_lazy_legacy_variable() -> None:
    """tensordict 0.14's ``set_lazy_legacy`` (used inside ``torch.stack`` and ``from_modules``)
    leaves ``LAZY_LEGACY_OP="None"`` in the environment on exit; a worker that imports
    tensordict 0.14 with it fails at every stack. ``"None"`` means unset, so it goes."""
    if os.environ.get("LAZY_LEGACY_OP") == "None":
        del os.environ["LAZY_LEGACY_OP"]


class _ParallelView(RowView, ParallelEnv):
    """``ParallelEnv[i]``: a view on some of the parent's sub-envs (see ``rl_envs.batched._view``)."""
