"""``AsyncEnvPool``: envs in worker threads or processes, stepped and reset without waiting."""

from __future__ import annotations

import queue
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    TensorDict,
    TensorDictBase,
    maybe_dense_stack,
)

from rl_envs.batched import _async_worker as worker
from rl_envs.batched._layout import as_kwargs_list, set_batched_specs
from rl_envs.batched._procwatch import check_timeout, describe_process
from rl_envs.batched.parallel import WorkerError, WorkerTimeoutError
from rl_envs.env_base import EnvBase
from rl_envs.specs import NonTensor

__all__ = ["AsyncEnvPool"]

_STACKS: dict[str, Callable[[list[TensorDictBase]], TensorDictBase]] = {
    "dense": torch.stack,
    "maybe_dense": maybe_dense_stack,
    "lazy": LazyStackedTensorDict.lazy_stack,
}
_POLL_S = 0.05


class AsyncEnvPool(EnvBase):
    """Envs run by one worker each (a thread or a process), stepped without waiting for all.

    As an env, the pool has batch ``[num_envs, *sub_batch]`` and steps / resets every
    env (``"_reset"`` resets only the flagged ones). Its point is the asynchronous API:
    ``async_step_send(td)`` hands each row of ``td`` to the env named in its
    ``"env_index"`` entry and returns at once; ``async_step_recv(min_get)`` returns the
    results of at least ``min_get`` of them, as soon as they are in, stacked in env order
    with their ``"env_index"``. Likewise ``async_reset_send`` / ``async_reset_recv`` and
    ``async_step_and_maybe_reset_send`` / ``..._recv``. An env is busy from its send until
    its result is received; sending to a busy env raises.

    Args:
        env_makers: a callable returning an env (or an env), or one per env.
        backend: ``"threading"`` (default; envs share this process) or
            ``"multiprocessing"`` (one process per env; makers must pickle unless
            ``mp_start_method="fork"``).
        stack: how results are stacked: ``"dense"`` (default), ``"maybe_dense"`` or ``"lazy"``.
        create_env_kwargs: keyword arguments for the makers (a dict, or one per env).
        mp_start_method: for ``"multiprocessing"``: ``"fork"`` where available, else ``"spawn"``.
        timeout: seconds to wait for an env's answer (building, stepping, resetting,
            seeding; the default of the ``async_*_recv`` calls) before
            :class:`WorkerTimeoutError` names the env, its process and what it is doing.
            ``math.inf`` waits forever, explicitly. Process workers also die with the
            pool's process, even when blocked in an env's code.

    Raises:
        ValueError: an unknown backend or stack, envs whose specs differ, a bad timeout.
        WorkerError: an env failed to build or its worker died (the message holds its
            traceback or exit status).
        WorkerTimeoutError: an env did not answer within ``timeout``.

    Example:
        >>> import torch
        >>> from rl_envs import AsyncEnvPool, PendulumEnv
        >>> env = AsyncEnvPool([PendulumEnv, PendulumEnv])
        >>> root = env.reset()
        >>> list(root["env_index"])
        [0, 1]
        >>> root["action"] = torch.zeros(2, 1)
        >>> env.async_step_send(root[1:])  # step env 1 only
        >>> list(env.async_step_recv()["env_index"])
        [1]
        >>> env.close()
    """

    env_index_key = "env_index"
    """The root entry naming the env of each row (TorchRL's ``"env_index"``)."""

    def __init__(
        self,
        env_makers: Any,
        *,
        backend: str = "threading",
        stack: str = "dense",
        create_env_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        mp_start_method: str | None = None,
        timeout: float = 300.0,
    ) -> None:
        timeout = check_timeout(timeout, "AsyncEnvPool")
        makers = list(env_makers) if isinstance(env_makers, Sequence) else [env_makers]
        if not makers:
            raise ValueError("AsyncEnvPool needs at least one env maker.")
        if stack not in _STACKS:
            raise ValueError(f"AsyncEnvPool(stack={stack!r}): expected one of {list(_STACKS)}.")
        kwargs = as_kwargs_list(create_env_kwargs, len(makers))
        if backend == "threading":
            workers, inboxes, outbox = worker.start_threads(makers, kwargs)
        elif backend == "multiprocessing":
            import multiprocessing as mp

            if mp_start_method is None:
                mp_start_method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
            workers, inboxes, outbox = worker.start_processes(makers, kwargs, mp_start_method)
        else:
            raise ValueError(
                f"AsyncEnvPool(backend={backend!r}): expected 'threading' or 'multiprocessing'."
            )
        try:
            meta = _read_metas(workers, outbox, len(makers), timeout)
        except BaseException:
            worker.stop(workers, inboxes)
            raise
        super().__init__(device=meta.device, batch_size=(len(makers), *meta.batch_size))
        self.num_envs = len(makers)
        self.env_makers = makers
        self.create_env_kwargs = kwargs
        self.backend = backend
        self.stack = stack
        self.min_get = 1
        self.timeout = timeout
        self._workers = workers
        set_batched_specs(self, meta, self.num_envs)
        state = self.full_state_spec.clone()
        state[self.env_index_key] = NonTensor(shape=self.batch_size, example_data=0)
        self.full_state_spec = state
        self._outbox = outbox
        self._inboxes = inboxes
        self._busy: dict[int, str] = {}  # env -> kind of the command it runs (until received)
        self._ready: dict[str, dict[int, Any]] = {kind: {} for kind in worker.KINDS}
        self._lock = threading.RLock()
        self._finalizer = weakref.finalize(self, worker.stop, workers, inboxes)

    # --------------------------------------------------------------- async API
    def async_step_send(
        self, tensordict: TensorDictBase, env_index: int | list[int] | None = None
    ) -> None:
        """Sends each row of ``tensordict`` (roots with actions) to its env's ``step``.

        Args:
            tensordict: one row per env (or a single env's root); the envs are read from
                its ``"env_index"`` entry unless ``env_index`` names them.
            env_index: the env (an int, for a single root) or envs of the rows.
        """
        self._send("step", tensordict, env_index)

    def async_step_recv(
        self,
        min_get: int | None = None,
        env_index: int | None = None,
        *,
        max_get: int | None = None,
        timeout: float | None = None,
    ) -> TensorDictBase:
        """Results of ``env.step`` for at least ``min_get`` envs (default :attr:`min_get`).

        Args:
            min_get: wait until this many results are in.
            env_index: wait for this env's result only and return it unstacked.
            max_get: return at most this many (the others stay for the next call).
            timeout: seconds to wait before ``TimeoutError``.
        """
        return self._recv("step", min_get, env_index, max_get, timeout)

    def async_reset_send(
        self, tensordict: TensorDictBase | None = None, env_index: int | list[int] | None = None
    ) -> None:
        """Sends a reset to the envs named in ``tensordict["env_index"]`` or ``env_index``
        (every env when both are ``None``); rows of ``tensordict`` go to ``env.reset``."""
        self._send("reset", tensordict, env_index)

    def async_reset_recv(
        self,
        min_get: int | None = None,
        env_index: int | None = None,
        *,
        max_get: int | None = None,
        timeout: float | None = None,
    ) -> TensorDictBase:
        """Results of ``env.reset``; the arguments are those of :meth:`async_step_recv`."""
        return self._recv("reset", min_get, env_index, max_get, timeout)

    def async_step_and_maybe_reset_send(
        self, tensordict: TensorDictBase, env_index: int | list[int] | None = None
    ) -> None:
        """Like :meth:`async_step_send`, running ``env.step_and_maybe_reset``."""
        self._send("step_and_maybe_reset", tensordict, env_index)

    def async_step_and_maybe_reset_recv(
        self,
        min_get: int | None = None,
        env_index: int | None = None,
        *,
        max_get: int | None = None,
        timeout: float | None = None,
    ) -> tuple[TensorDictBase, TensorDictBase]:
        """``(transitions, next roots)`` of ``env.step_and_maybe_reset``; arguments as in
        :meth:`async_step_recv`."""
        return self._recv("step_and_maybe_reset", min_get, env_index, max_get, timeout)

    # ------------------------------------------------------------- env hooks
    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            envs = list(range(self.num_envs))
        else:
            envs = mask.reshape(self.num_envs, -1).any(-1).nonzero().squeeze(-1).tolist()
        if not envs:
            return TensorDict(batch_size=self.batch_size, device=self.device)
        rows = None if tensordict is None else [tensordict[i] for i in envs]
        self._dispatch("reset", envs, rows)
        results = self._take("reset", self._wait("reset", envs, self.timeout), envs)
        if len(envs) < self.num_envs:  # rows not reset: zeros, replaced by the input's values
            filler = results[0].apply(torch.zeros_like)
            by_env = dict(zip(envs, results, strict=True))
            results = [by_env[i] if i in by_env else filler.clone() for i in range(self.num_envs)]
        return self._stack(results, range(self.num_envs))

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        envs = list(range(self.num_envs))
        self._dispatch("step", envs, list(tensordict.unbind(0)))
        results = self._take("step", self._wait("step", envs, self.timeout), envs)
        return _STACKS[self.stack]([r.get("next") for r in results])

    def _set_seed(self, seed: int | None) -> None:
        for i in range(self.num_envs):  # env i gets seed + i, as in SerialEnv / ParallelEnv
            self._put(i, ("seed", None if seed is None else seed + i))
        self._wait("seed", list(range(self.num_envs)), self.timeout)
        self._ready["seed"].clear()

    # ------------------------------------------------------------- lifecycle
    def shutdown(self) -> None:
        """Closes every env and stops the workers (TorchRL's name; :meth:`close` does it too)."""
        self._finalizer()
        self.is_closed = True

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Closes every env and stops the workers; closing again does nothing."""
        del raise_if_closed
        self.shutdown()

    # -------------------------------------------------------------- plumbing
    def _send(self, kind: str, tensordict: TensorDictBase | None, env_index: Any) -> None:
        envs = self._env_indices(tensordict, env_index)
        if tensordict is None:
            rows = None
        elif tensordict.batch_dims == len(self.batch_size):
            rows = list(tensordict.unbind(0))
        else:  # a single env's root
            rows = [tensordict]
        if rows is not None and len(rows) != len(envs):
            raise ValueError(
                f"AsyncEnvPool.async_{kind}_send: {len(rows)} rows for envs {envs}; "
                "give one row per env (batch [k, *sub_batch]) or a single env's root."
            )
        self._dispatch(kind, envs, rows)

    def _dispatch(self, kind: str, envs: list[int], rows: list[TensorDictBase] | None) -> None:
        if self.is_closed:
            raise RuntimeError("AsyncEnvPool is closed: create a new one.")
        with self._lock:
            busy = [i for i in envs if i in self._busy]
            if busy:
                raise RuntimeError(
                    f"AsyncEnvPool: envs {busy} are still running a {self._busy[busy[0]]}; "
                    f"receive their results first (async_{self._busy[busy[0]]}_recv)."
                )
            self._busy.update(dict.fromkeys(envs, kind))
        for j, i in enumerate(envs):
            self._put(i, (kind, None if rows is None else rows[j].exclude(self.env_index_key)))

    def _put(self, env: int, message: tuple[str, Any]) -> None:
        self._inboxes[env].put(worker.pack(message, self.backend == "multiprocessing"))

    def _env_indices(self, tensordict: TensorDictBase | None, env_index: Any) -> list[int]:
        if env_index is not None:
            envs = [env_index] if isinstance(env_index, int) else [int(i) for i in env_index]
        elif tensordict is None:
            envs = list(range(self.num_envs))
        elif (value := tensordict.get(self.env_index_key, None)) is not None:
            envs = _first_ints(value)
        else:
            raise KeyError(
                f"AsyncEnvPool: the input has no {self.env_index_key!r} entry naming the envs "
                "of its rows: keep the one the pool returned, or pass env_index=."
            )
        bad = [i for i in envs if not 0 <= i < self.num_envs]
        if bad or len(set(envs)) != len(envs):
            raise ValueError(
                f"AsyncEnvPool: env indices {envs} must be distinct and in [0, {self.num_envs})."
            )
        return envs

    def _recv(
        self,
        kind: str,
        min_get: int | None,
        env_index: int | None,
        max_get: int | None,
        timeout: float | None,
    ) -> Any:
        if env_index is not None:
            got = self._take(kind, self._wait(kind, [env_index], timeout), [env_index])
            return self._label(got[0], env_index)
        min_get = self.min_get if min_get is None else min_get
        running = sorted(i for i, k in self._busy.items() if k == kind)
        if min_get > len(running):
            raise RuntimeError(
                f"AsyncEnvPool.async_{kind}_recv(min_get={min_get}): only {len(running)} "
                f"envs are running a {kind} (send to more envs first)."
            )
        ready = self._wait(kind, running, timeout, min_get)
        envs = ready[:max_get] if max_get is not None else ready
        results = self._take(kind, envs, envs)
        if kind == "step_and_maybe_reset":
            return self._stack([r[0] for r in results], envs), self._stack(
                [r[1] for r in results], envs
            )
        return self._stack(results, envs)

    def _wait(
        self, kind: str, envs: list[int], timeout: float | None, count: int | None = None
    ) -> list[int]:
        """Collects worker messages until ``count`` (default: all) of ``envs`` answered.

        ``timeout=None`` means the pool's own ``timeout``; a dead worker raises at once.
        """
        count = len(envs) if count is None else count
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        ready = self._ready.setdefault(kind, {})
        while True:
            with self._lock:
                done = sorted(i for i in envs if i in ready)
                if len(done) >= count:
                    return done
                try:
                    what, i, payload = worker.unpack(self._outbox.get(timeout=_POLL_S))
                except queue.Empty:
                    waiting = [i for i in envs if i not in ready]
                    self._raise_if_dead(kind, waiting)
                    if time.monotonic() > deadline:
                        raise WorkerTimeoutError(
                            f"AsyncEnvPool: {kind} results of {count} envs not in after "
                            f"{self.timeout if timeout is None else timeout} s (ready: {done}); "
                            f"{self._describe(waiting)}. Raise timeout= if the envs are just "
                            "slow; close() stops the workers."
                        ) from None
                    continue
                if what == "error":
                    self._busy.pop(i, None)
                    raise WorkerError(f"AsyncEnvPool: env {i} failed:\n{payload}")
                self._ready.setdefault(what, {})[i] = payload

    def _raise_if_dead(self, kind: str, envs: list[int]) -> None:
        dead = [i for i in envs if not self._workers[i].is_alive()]
        if dead:
            codes = [getattr(self._workers[i], "exitcode", None) for i in dead]
            raise WorkerError(
                f"AsyncEnvPool: the worker of env(s) {dead} ended while running a {kind} "
                f"(exit codes {codes}; a negative code is the signal that killed it). Close the "
                "pool and build a new one."
            )

    def _describe(self, envs: list[int]) -> str:
        parts = []
        for i in envs:
            pid = getattr(self._workers[i], "pid", None)
            where = f"thread {self._workers[i].name}" if pid is None else f"pid {pid}"
            doing = "" if pid is None else f", which {describe_process(pid)}"
            parts.append(f"env {i} ({where}{doing})")
        return "waiting on " + "; ".join(parts)

    def _take(self, kind: str, ready: list[int], envs: list[int]) -> list[Any]:
        with self._lock:
            for i in envs:
                self._busy.pop(i, None)
            return [self._ready[kind].pop(i) for i in ready]

    def _label(self, td: TensorDictBase, env: int) -> TensorDictBase:
        td.set(self.env_index_key, NonTensorData(env, batch_size=td.batch_size))
        return td

    def _stack(self, results: list[TensorDictBase], envs: Sequence[int]) -> TensorDictBase:
        labelled = [self._label(td, i) for td, i in zip(results, envs, strict=True)]
        return _STACKS[self.stack](labelled)


def _read_metas(workers: list[Any], outbox: Any, n: int, timeout: float) -> Any:
    """The sub-env metadata every worker sends once built; all must agree."""
    metas: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    while len(metas) < n:
        try:
            what, i, payload = worker.unpack(outbox.get(timeout=min(1.0, timeout)))
        except queue.Empty:
            dead = [i for i, w in enumerate(workers) if not w.is_alive() and i not in metas]
            if dead:
                raise WorkerError(
                    f"AsyncEnvPool: workers {dead} ended before building their env."
                ) from None
            if time.monotonic() > deadline:
                missing = sorted(set(range(n)) - set(metas))
                raise WorkerTimeoutError(
                    f"AsyncEnvPool: envs {missing} were not built within {timeout} s; raise "
                    "timeout= if building them is just slow."
                ) from None
            continue
        if what == "error":
            raise WorkerError(f"AsyncEnvPool: env {i} failed to build:\n{payload}")
        metas[i] = payload
    first = metas[0]
    for i in range(1, n):
        if metas[i] != first:
            raise ValueError(
                f"AsyncEnvPool: env {i} has other specs, batch size or device than env 0; "
                "every env of a pool must have the same."
            )
    return first


def _first_ints(value: Any) -> list[int]:
    """The env index of each row from an ``"env_index"`` entry (tensor or non-tensor)."""
    items = value.tolist() if hasattr(value, "tolist") else getattr(value, "data", value)
    if not isinstance(items, list):
        return [int(items)]
    out = []
    for item in items:
        while isinstance(item, list):  # sub-batch dims repeat the index
            item = item[0]
        out.append(int(item))
    return out
