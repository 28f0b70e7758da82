"""Worker processes shared by ``MultiSyncCollector`` and ``MultiAsyncCollector``.

Each worker builds its env (from a picklable constructor) and its own
``Collector`` writing into a shared-memory buffer; the parent sends small
commands over a pipe and reads the buffers in place. Weights go through
:class:`~rl_collectors._weights.SharedWeights`. A worker that raises sends its
traceback; a worker that dies is seen through its process sentinel; a worker
that does not answer within ``timeout`` seconds (blocked, stopped by ``SIGSTOP``)
is named with its pid and process state. Every time the parent stops every
worker and raises: no hang, no orphan. Workers also die with the parent process
(``PR_SET_PDEATHSIG`` on Linux plus a watchdog thread, see ``_procwatch``).
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import pickle
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import wait
from typing import Any

import cloudpickle
import torch
import torch.multiprocessing as mp
from tensordict import TensorDictBase
from tensordict.nn import InteractionType
from torch import nn

from rl_collectors._background import BackgroundCollection
from rl_collectors._batching import BatchTimings, check_options, merge_timings
from rl_collectors._introspect import call_args, check_stats_view, progress_stats
from rl_collectors._policy import resolve_exploration_type
from rl_collectors._procwatch import check_timeout, describe_process, process_state
from rl_collectors._trajs import TrajectoryBatching
from rl_collectors._weights import SharedWeights
from rl_collectors._worker import WorkerSpec, worker_main
from rl_collectors.collector import is_env_instance
from rl_collectors.weight_sync import WeightSyncScheme, policy_scheme

DeviceLike = torch.device | str | int | None
_PRELOAD = ["torch", "tensordict", "rl_collectors._worker"]
DEFAULT_TIMEOUT_S = 300.0


def _drop_leaked_lazy_legacy_variable() -> None:
    """tensordict 0.14's ``set_lazy_legacy`` (used inside ``torch.stack`` and ``from_modules``)
    leaves ``LAZY_LEGACY_OP="None"`` in the environment on exit; a worker that imports
    tensordict 0.14 with it fails at every stack. ``"None"`` means unset, so it goes."""
    if os.environ.get("LAZY_LEGACY_OP") == "None":
        del os.environ["LAZY_LEGACY_OP"]


def _context(start_method: str | None) -> Any:
    """``forkserver`` (with torch and tensordict preloaded, so workers start in milliseconds)
    where the platform has it, else ``spawn``; or the method asked for."""
    methods = mp.get_all_start_methods()
    method = start_method or ("forkserver" if "forkserver" in methods else "spawn")
    if method not in methods:
        raise ValueError(
            f"mp_start_method={method!r} is not available here; choose from {methods}."
        )
    _drop_leaked_lazy_legacy_variable()
    context = mp.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(_PRELOAD)
    return context


def _env_for_worker(env: Any) -> Any:
    """An env instance goes to its worker pickled once, here (as in TorchRL): plain pickle
    where it can, else cloudpickle (lambdas and local functions the env holds); an env
    neither can pickle fails here, early and clearly."""
    try:
        by_value = _EnvByValue(env)
    except Exception as error:
        raise TypeError(
            f"the env instance {type(env).__name__} cannot be pickled to a worker process "
            f"({type(error).__name__}: {error}); pass a constructor instead "
            "(e.g. functools.partial(MyEnv, ...) or EnvCreator(lambda: MyEnv(...)))."
        ) from error
    return by_value


def _dumps(obj: Any) -> bytes:
    """Pickle ``obj``; local functions and lambdas go by value with cloudpickle (as TorchRL's
    ``CloudpickleWrapper``). Plain ``pickle.loads`` reads either."""
    try:
        return pickle.dumps(obj)
    except (pickle.PicklingError, AttributeError, TypeError):
        return cloudpickle.dumps(obj)


class _PickledByValue:
    """A constructor that plain pickle refuses (a lambda, a local function), sent by value."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._bytes = _dumps(fn)
        self._fn: Callable[..., Any] | None = None

    def __getstate__(self) -> bytes:
        return self._bytes

    def __setstate__(self, state: bytes) -> None:
        self._bytes, self._fn = state, None

    def _load(self) -> Any:
        if self._fn is None:
            self._fn = pickle.loads(self._bytes)
        return self._fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._load()(*args, **kwargs)


class _EnvByValue(_PickledByValue):
    """An env instance plain pickle refuses, sent by value; the worker's call returns it."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._load()


def _picklable_constructor(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` itself when plain pickle takes it, else a wrapper that sends it by value."""
    try:
        pickle.dumps(fn)
    except (pickle.PicklingError, AttributeError, TypeError):
        return _PickledByValue(fn)
    return fn


def _per_worker(name: str, value: Any, num_workers: int) -> list[Any]:
    """One device per worker: a list or tuple gives each worker its own (TorchRL's form)."""
    if not isinstance(value, (list, tuple)):
        return [value] * num_workers
    if len(value) != num_workers:
        raise ValueError(
            f"{name} is a list of {len(value)} devices for {num_workers} workers; give one "
            "device per worker, or a single device for all of them."
        )
    return list(value)


def _worker_envs(
    create_env_fn: Callable[..., Any] | Sequence[Callable[..., Any]],
    num_workers: int | None,
    create_env_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None,
) -> tuple[list[Callable[..., Any]], list[dict[str, Any]]]:
    """One picklable env constructor and one kwargs dict per worker.

    Raises:
        ValueError: no worker, or counts that disagree.
        TypeError: an entry that is neither an env instance nor a constructor.
    """
    env_fns = list(create_env_fn) if isinstance(create_env_fn, Sequence) else None
    if env_fns is None:
        if num_workers is None:
            raise ValueError(
                "pass a list of env constructors (one per worker) or one constructor and num_workers."
            )
        env_fns = [create_env_fn] * num_workers
    elif num_workers is not None and num_workers != len(env_fns):
        raise ValueError(
            f"num_workers={num_workers} but {len(env_fns)} env constructors were given."
        )
    if not env_fns:
        raise ValueError("a multiprocess collector needs at least one worker.")
    for fn in env_fns:
        if not callable(fn) and not is_env_instance(fn):
            raise TypeError(
                "each worker needs an env: pass an env instance (sent to the worker by "
                "pickling) or a picklable constructor (a class, a function, "
                f"functools.partial, EnvCreator); got {type(fn).__name__}."
            )
    env_fns = [
        _env_for_worker(fn) if is_env_instance(fn) else _picklable_constructor(fn) for fn in env_fns
    ]
    if isinstance(create_env_kwargs, Sequence):
        env_kwargs = [dict(k) for k in create_env_kwargs]
    else:
        env_kwargs = [dict(create_env_kwargs or {}) for _ in env_fns]
    if len(env_kwargs) != len(env_fns):
        raise ValueError(f"{len(env_kwargs)} create_env_kwargs for {len(env_fns)} workers.")
    return env_fns, env_kwargs


def _frames_per_worker(frames_per_batch: int | Sequence[int], num_workers: int) -> list[int] | None:
    """TorchRL's per-worker ``frames_per_batch`` (a sequence, one count per worker), or ``None``.

    Raises:
        ValueError: a sequence whose length is not the number of workers.
    """
    if not isinstance(frames_per_batch, Sequence):
        return None
    if len(frames_per_batch) != num_workers:
        raise ValueError(
            "If `frames_per_batch` is provided as a sequence, it should contain exactly one "
            f"value per worker. Got {len(frames_per_batch)} values for {num_workers} workers."
        )
    return [int(frames) for frames in frames_per_batch]


def _policy_factories(
    policy_factory: Callable[[], Any] | Sequence[Callable[[], Any]] | None, num_workers: int
) -> list[Callable[[], Any]] | None:
    """One policy factory per worker (TorchRL's ``policy_factory``: one, or one per worker).

    Raises:
        ValueError: a sequence whose length is not the number of workers.
        TypeError: an entry that is not callable.
    """
    if policy_factory is None:
        return None
    if isinstance(policy_factory, Sequence):
        factories = list(policy_factory)
        if len(factories) != num_workers:
            raise ValueError(
                f"policy_factory holds {len(factories)} factories for {num_workers} workers; "
                "give one factory, or one per worker."
            )
    else:
        factories = [policy_factory] * num_workers
    for factory in factories:
        if not callable(factory):
            raise TypeError(
                f"policy_factory must be callable (it builds the policy in each worker); got "
                f"{type(factory).__name__}."
            )
    return factories


def _common_storing_device(devices: dict[str, list[DeviceLike]]) -> torch.device:
    """The one device the workers' batches are gathered on (``storing_device``, else ``device``,
    else CPU); workers whose storing devices differ raise a ``ValueError``."""
    storing = {
        torch.device(s or d or "cpu")
        for s, d in zip(devices["storing_device"], devices["device"], strict=True)
    }
    if len(storing) > 1:
        raise ValueError(
            f"the workers' batches are gathered on one device, but their storing devices "
            f"differ ({sorted(map(str, storing))}); give every worker the same "
            "storing_device (policy and env devices may differ per worker)."
        )
    return storing.pop()


_LIVE_COLLECTORS: weakref.WeakSet[MultiCollector] = weakref.WeakSet()


@atexit.register
def _shutdown_live_collectors() -> None:
    """Stop the workers of collectors never shut down, before multiprocessing's own exit
    handler joins its (non-daemonic) children: registered later, this runs first."""
    for collector in list(_LIVE_COLLECTORS):
        with contextlib.suppress(Exception):
            collector.shutdown(timeout=1.0)


def _subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_subclasses(direct))]


class WorkerError(RuntimeError):
    """A collector worker raised or died; the message holds its traceback or exit code."""


class WorkerTimeoutError(WorkerError, TimeoutError):
    """A collector worker did not answer within the collector's ``timeout``; the message
    names the worker, its pid, the command it was running and its process state."""


class MultiCollector(TrajectoryBatching, BackgroundCollection):
    """Process management, weight sync, checkpointing and lifecycle for multiprocess collectors.

    The base of :class:`~rl_collectors.MultiSyncCollector` and
    :class:`~rl_collectors.MultiAsyncCollector`. Instantiated itself, as in TorchRL,
    ``MultiCollector(..., sync=True)`` builds a ``MultiSyncCollector`` and ``sync=False``
    a ``MultiAsyncCollector``.

    Examples:
        >>> collector = MultiCollector([make_env] * 2, policy, frames_per_batch=100,
        ...                            sync=True)  # doctest: +SKIP
        >>> type(collector).__name__  # doctest: +SKIP
        'MultiSyncCollector'
    """

    _synchronous: bool | None = None  # set by the subclasses

    def __new__(cls, *args: Any, sync: bool | None = None, **kwargs: Any) -> MultiCollector:
        if cls is MultiCollector:
            if sync is None:
                raise TypeError(
                    "MultiCollector needs sync=True (MultiSyncCollector) or sync=False "
                    "(MultiAsyncCollector)."
                )
            cls = next(c for c in _subclasses(MultiCollector) if c._synchronous is bool(sync))
        return super().__new__(cls)

    def __init__(
        self,
        create_env_fn: Callable[..., Any] | Sequence[Callable[..., Any]],
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        num_workers: int | None = None,
        frames_per_batch: int | Sequence[int],
        total_frames: int = -1,
        device: DeviceLike | Sequence[DeviceLike] = None,
        storing_device: DeviceLike | Sequence[DeviceLike] = None,
        policy_device: DeviceLike | Sequence[DeviceLike] = None,
        env_device: DeviceLike | Sequence[DeviceLike] = None,
        create_env_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool = False,
        exploration_type: InteractionType | str = InteractionType.RANDOM,
        replay_buffer: Any | None = None,
        extend_buffer: bool = True,
        reset_when_done: bool = True,
        use_buffers: bool | None = None,
        flatten: bool = False,
        progress_bar: bool = False,
        track_policy_version: bool = False,
        mp_start_method: str | None = None,
        num_sub_threads: int = 1,
        track_traj_ids: bool = True,
        pre_collect_hook: Callable[[], None] | None = None,
        post_collect_hook: Callable[[TensorDictBase], None] | None = None,
        weight_sync_schemes: dict[str, WeightSyncScheme] | None = None,
        trust_policy: bool | None = None,
        compile_policy: bool | dict[str, Any] | None = None,
        cudagraph_policy: bool | dict[str, Any] | None = None,
        sync: bool | None = None,
        policy_factory: Callable[[], Any] | Sequence[Callable[[], Any]] | None = None,
        trajs_per_batch: int | None = None,
        traj_format: str | None = None,
        trajs_per_write: int | None = None,
        set_truncated: bool = False,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.timeout = check_timeout(timeout, type(self).__name__)
        if sync is not None and bool(sync) is not self._synchronous:
            raise ValueError(
                f"sync={sync} does not match {type(self).__name__}; use MultiCollector(..., "
                "sync=...) or the class for the mode you want."
            )
        check_options(
            split_trajs,
            flatten,
            reset_when_done=reset_when_done,
            replay_buffer=replay_buffer,
            extend_buffer=extend_buffer,
            postproc=postproc,
        )
        self._closed = True  # until the workers exist
        env_fns, env_kwargs = _worker_envs(create_env_fn, num_workers, create_env_kwargs)
        self.num_workers = len(env_fns)
        self._frames_per_worker = _frames_per_worker(frames_per_batch, self.num_workers)
        self.frames_per_batch = (
            frames_per_batch if self._frames_per_worker is None else sum(self._frames_per_worker)
        )
        self.total_frames = total_frames
        self.postproc = postproc
        self.split_trajs = split_trajs
        self.flatten = flatten
        self.replay_buffer = replay_buffer
        self._set_trajs_per_batch(trajs_per_batch, traj_format, split_trajs, trajs_per_write)
        self.extend_buffer = extend_buffer
        self.use_buffers = use_buffers
        self._use_buffers = True  # batches are always written into preallocated buffers
        self.progress_bar = progress_bar
        self.track_traj_ids = track_traj_ids
        # TorchRL's switch: batches hold no key with a part starting with "_" (set False to keep them)
        self._exclude_private_keys = True
        self.track_policy_version = track_policy_version
        self.policy = policy
        self._policy_factories = _policy_factories(policy_factory, self.num_workers)
        self._pre_collect_hook = pre_collect_hook
        self._post_collect_hook = post_collect_hook
        self._worker_frames = [0] * self.num_workers
        devices = {
            name: _per_worker(name, value, self.num_workers)
            for name, value in (
                ("device", device),
                ("storing_device", storing_device),
                ("policy_device", policy_device),
                ("env_device", env_device),
            )
        }
        self.storing_device = _common_storing_device(devices)
        self._frames = 0
        self._iter = 0
        self._iterator: Iterator[TensorDictBase | None] | None = None
        self.last_timings: BatchTimings | None = None
        self.worker_timings: list[BatchTimings | None] = [None] * self.num_workers
        self._context = _context(mp_start_method)
        self.weight_sync_scheme = policy_scheme(weight_sync_schemes)
        self._weight_sync_schemes = {"policy": self.weight_sync_scheme}
        template = (
            policy if isinstance(policy, nn.Module) else self.weight_sync_scheme.sender_source
        )
        self._weights = (
            SharedWeights(template, self._context)
            if isinstance(template, nn.Module | TensorDictBase) and self.weight_sync_scheme.enabled
            else None
        )
        collector_kwargs = {
            "max_frames_per_traj": max_frames_per_traj,
            "init_random_frames": math.ceil((init_random_frames or 0) / self.num_workers),
            "reset_at_each_iter": reset_at_each_iter,
            "track_policy_version": track_policy_version,
            "exploration_type": resolve_exploration_type(exploration_type),
            "storing_device": "cpu",
            "trust_policy": trust_policy,
            "compile_policy": compile_policy,
            "cudagraph_policy": cudagraph_policy,
            "set_truncated": set_truncated,
        }
        self.set_truncated = set_truncated
        specs = self._worker_specs(env_fns, env_kwargs, devices, collector_kwargs, num_sub_threads)
        self._start_workers(specs)
        self.env_batch_size = self._await_env_batch_size()
        self._env_numel = self.env_batch_size.numel()
        try:
            self._check_frames()
        except ValueError:
            self.shutdown()
            raise

    def _worker_specs(
        self,
        env_fns: list[Callable[..., Any]],
        env_kwargs: list[dict[str, Any]],
        devices: dict[str, list[DeviceLike]],
        collector_kwargs: dict[str, Any],
        num_threads: int,
    ) -> list[WorkerSpec]:
        """What each worker builds: its env, the policy (pickled once) and its collector."""
        if self._policy_factories is not None:
            # Each worker builds its own policy; the parent's policy (if any) only holds weights.
            policy_bytes = [_dumps(factory) for factory in self._policy_factories]
        else:
            policy_bytes = [_dumps(self.policy) if self.policy is not None else None] * len(env_fns)
        return [
            WorkerSpec(
                index=index,
                num_workers=self.num_workers,
                create_env_fn=fn,
                create_env_kwargs=kwargs,
                policy_bytes=policy_bytes[index],
                policy_is_factory=self._policy_factories is not None,
                frames_per_batch=self._worker_frames_per_batch(),
                collector_kwargs={
                    **collector_kwargs,
                    "device": devices["device"][index],
                    "policy_device": devices["policy_device"][index],
                    "env_device": devices["env_device"][index],
                },
                num_threads=num_threads,
                preemptive=getattr(self, "_preempt", False),
                hooks_bytes=self._hooks_bytes(),
            )
            for index, (fn, kwargs) in enumerate(zip(env_fns, env_kwargs, strict=True))
        ]

    def _start_workers(self, specs: list[WorkerSpec]) -> None:
        """Start one process per spec, each with a pipe and a stop flag; on a failed start,
        stop those already started and raise."""
        self._conns: list[Any] = []
        self._procs: list[Any] = []
        self._stops: list[Any] = []
        self._buffers: list[TensorDictBase | None] = [None] * self.num_workers
        self._non_tensor: list[dict[Any, Any] | None] = [None] * self.num_workers
        # What each worker was last asked to do, and when (for the timeout and its message).
        self._doing: list[str] = ["start (building its env and policy)"] * self.num_workers
        self._sent_at: list[float] = [time.monotonic()] * self.num_workers
        self._closed = False
        # PR_SET_PDEATHSIG fires when the forking *thread* exits: the forkserver's main
        # thread is safe; fork / spawn from another thread rely on the watchdog alone.
        pdeathsig = (
            self._context.get_start_method() == "forkserver"
            or threading.current_thread() is threading.main_thread()
        )
        for spec in specs:
            spec.parent_pid, spec.pdeathsig = os.getpid(), pdeathsig
            parent_end, child_end = self._context.Pipe()
            stop = self._context.RawValue("b", 0)
            proc = self._context.Process(
                target=worker_main,
                args=(spec, child_end, self._weights, stop),
                name=f"rl-collectors-worker-{spec.index}",
                # Not daemonic: a worker's env may start processes itself (a ParallelEnv).
                # Workers still go at exit: _shutdown_live_collectors runs first.
                daemon=False,
            )
            try:
                proc.start()
            except BaseException:
                self.shutdown()
                raise
            child_end.close()
            self._conns.append(parent_end)
            self._procs.append(proc)
            self._stops.append(stop)
        _LIVE_COLLECTORS.add(self)

    def _await_env_batch_size(self) -> torch.Size:
        """Each worker's first message: its env's batch size (or its configuration error).

        Raises:
            ValueError, TypeError: a worker's configuration error, or envs of different batch
                sizes; every worker is stopped first.
        """
        sizes: dict[int, torch.Size] = {}
        for _ in range(self.num_workers):
            index, message = self._receive(set(range(self.num_workers)) - set(sizes))
            if message[0] == "config_error":
                self.shutdown()
                error = ValueError if message[1] == "ValueError" else TypeError
                raise error(f"worker {index}: {message[2]}")
            sizes[index] = torch.Size(message[1])
        if len(set(sizes.values())) != 1:
            self.shutdown()
            raise ValueError(
                f"the workers' envs have different batch sizes {dict(sorted(sizes.items()))}; "
                "batches are stacked across workers, so every env must have the same batch_size."
            )
        return sizes[0]

    # -- hooks for the subclasses -----------------------------------------------------------
    def _worker_frames_per_batch(self) -> int:
        raise NotImplementedError

    def _check_frames(self) -> None:
        raise NotImplementedError

    def _batches(self) -> Iterator[TensorDictBase | None]:
        raise NotImplementedError

    # -- messaging --------------------------------------------------------------------------
    def _send(self, index: int, command: str, argument: Any = None) -> None:
        if self._closed:
            raise RuntimeError("this collector was shut down; create a new one.")
        self._doing[index], self._sent_at[index] = command, time.monotonic()
        try:
            self._conns[index].send((command, argument))
        except (BrokenPipeError, OSError):
            self._fail(index, None)

    def _request(self, index: int, command: str, argument: Any = None) -> Any:
        """Send one command to one idle worker and return the payload of its reply."""
        self._send(index, command, argument)
        _, message = self._receive({index})
        return message[1]

    def _receive(self, pending: set[int]) -> tuple[int, tuple[Any, ...]]:
        """Wait for the next message of a worker in ``pending``; raise if any worker fails."""
        if self._closed:
            raise RuntimeError("this collector was shut down; create a new one.")
        by_conn = {id(self._conns[i]): i for i in pending}
        by_sentinel = {p.sentinel: i for i, p in enumerate(self._procs)}
        # Each worker has `timeout` seconds from its own command (an async collector keeps
        # receiving from the others meanwhile).
        deadline = min(self._sent_at[i] for i in pending) + self.timeout
        while True:
            left = deadline - time.monotonic()
            ready = wait(
                [self._conns[i] for i in pending] + list(by_sentinel),
                None if left == float("inf") else max(0.0, left),
            )
            if not ready:
                now = time.monotonic()
                stuck = [i for i in pending if now - self._sent_at[i] >= self.timeout]
                if stuck:
                    self._timed_out(stuck)
                continue
            for obj in ready:
                if id(obj) in by_conn:
                    index = by_conn[id(obj)]
                    self._wait_while_stopped(index)
                    try:
                        message = obj.recv()
                    except (EOFError, OSError):
                        self._fail(index, None)
                    if message[0] == "error":
                        self._fail(index, message[1])
                    return index, message
            for obj in ready:
                if obj in by_sentinel:
                    index = by_sentinel[obj]
                    conn = self._conns[index]
                    if conn.poll():
                        try:
                            message = conn.recv()
                        except (EOFError, OSError):
                            message = ("exit", None)
                        if message[0] == "error":
                            self._fail(index, message[1])
                    self._fail(index, None)

    def _wait_while_stopped(self, index: int) -> None:
        """A message may carry a new shared-memory buffer, whose file descriptor the worker
        itself hands over while the message is read: reading from a stopped worker would
        block. So wait for it to resume, until its timeout."""
        pid = self._procs[index].pid
        while process_state(pid) in ("T", "t"):
            if time.monotonic() - self._sent_at[index] >= self.timeout:
                self._timed_out([index])
            time.sleep(0.02)

    def _timed_out(self, stuck: list[int]) -> None:
        """Kill the ``stuck`` workers at once, stop the others, raise :class:`WorkerTimeoutError`."""
        lines = [
            f"worker {i} (pid {self._procs[i].pid}) running {self._doing[i]!r}, which "
            f"{describe_process(self._procs[i].pid)}"
            for i in stuck
        ]
        self._shutdown(timeout=10.0, stuck=stuck)
        raise WorkerTimeoutError(
            f"{type(self).__name__}: no answer within timeout={self.timeout} s from "
            f"{'; '.join(lines)}. The collector is shut down and its workers are stopped. "
            "If the env or policy is just slow (a 'collect' is one worker's whole share of a "
            f"batch), pass a larger {type(self).__name__}(timeout=...); otherwise run the env "
            "and policy in a plain Collector to find what blocks."
        )

    def _fail(self, index: int, worker_traceback: str | None) -> None:
        proc = self._procs[index]
        proc.join(1.0)
        exitcode = proc.exitcode
        self.shutdown()
        if worker_traceback is not None:
            raise WorkerError(f"collector worker {index} raised:\n{worker_traceback}")
        raise WorkerError(
            f"collector worker {index} died (exit code {exitcode}) without a traceback: "
            "a crash in native code, os._exit or a kill. Run its env and policy in a plain "
            "Collector to see the error."
        )

    def _take_batch(self, index: int, message: tuple[Any, ...]) -> int:
        """Record the worker's buffer (if new) and timings; returns the steps it wrote."""
        _, buffer, written, timings, non_tensor = message
        if buffer is not None:
            self._buffers[index] = buffer
        # Strings and other non-tensor leaves come through the pipe, stacked per step.
        self._non_tensor[index] = non_tensor
        self.worker_timings[index] = timings
        self._worker_frames[index] += int(written) * self._env_numel
        return int(written)

    # -- hooks, stats, remote helpers -------------------------------------------------------
    def _hooks_bytes(self) -> bytes | None:
        hooks = (self._pre_collect_hook, self._post_collect_hook)
        return None if hooks == (None, None) else _dumps(hooks)

    def _push_hooks(self) -> None:
        """Send the hooks to every (idle) worker: they run there, around each batch."""
        self._idle_check()
        for index in range(self.num_workers):
            self._request(index, "set_hooks", self._hooks_bytes())

    @property
    def pre_collect_hook(self) -> Callable[[], None] | None:
        """Called (in each worker) with no argument before it collects a batch."""
        return self._pre_collect_hook

    @pre_collect_hook.setter
    def pre_collect_hook(self, hook: Callable[[], None] | None) -> None:
        self._pre_collect_hook = hook
        self._push_hooks()

    @property
    def post_collect_hook(self) -> Callable[[TensorDictBase], None] | None:
        """Called (in each worker) with the batch it has just collected."""
        return self._post_collect_hook

    @post_collect_hook.setter
    def post_collect_hook(self, hook: Callable[[TensorDictBase], None] | None) -> None:
        self._post_collect_hook = hook
        self._push_hooks()

    def stats(self, workers: str = "aggregate") -> dict[str, int | bool]:
        """A JSON-serialisable progress snapshot (see :meth:`Collector.stats`) plus
        ``workers`` and ``workers_alive``; ``workers="per_worker"`` gives each worker's
        frames as ``"worker_<i>/frames"`` instead, ``"both"`` gives both views.

        Raises:
            ValueError: ``workers`` is not ``"aggregate"``, ``"per_worker"`` or ``"both"``.
        """
        check_stats_view(workers)
        stats: dict[str, int | bool] = {}
        if workers != "per_worker":
            stats.update(
                progress_stats(
                    self._frames,
                    self._iter,
                    self.total_frames,
                    self.frames_per_batch,
                    self.policy_version,
                )
            )
        stats["workers"] = self.num_workers
        stats["workers_alive"] = 0 if self._closed else sum(p.is_alive() for p in self._procs)
        if workers != "aggregate":
            for index, frames in enumerate(self._worker_frames):
                stats[f"worker_{index}/frames"] = frames
        return stats

    def get_distant_attr(self, attr: str) -> list[Any]:
        """``getattr(collector, attr)`` of each worker's collector (e.g. ``"worker_idx"``)."""
        self._idle_check()
        return [self._request(index, "getattr", attr) for index in range(self.num_workers)]

    def map_fn(
        self,
        method_name: str,
        list_of_args: Sequence[tuple] | None = None,
        list_of_kwargs: Sequence[dict] | None = None,
    ) -> list[Any]:
        """Call ``<method_name>`` on worker ``i``'s collector with the ``i``-th arguments.

        Raises:
            ValueError: the argument lists do not hold one entry per worker.
        """
        if list_of_args is None and list_of_kwargs is None:
            list_of_args = [()] * self.num_workers
        calls = call_args(list_of_args, list_of_kwargs)
        if len(calls) != self.num_workers:
            raise ValueError(
                f"Expected {self.num_workers} argument entries (one per worker), got {len(calls)}."
            )
        self._idle_check()
        return [
            self._request(index, "call", (method_name, args, kwargs))
            for index, (args, kwargs) in enumerate(calls)
        ]

    # -- weights ----------------------------------------------------------------------------
    @property
    def policy_version(self) -> int:
        """The version of the weights the workers will use for their next batch."""
        return 0 if self._weights is None else self._weights.version

    def update_policy_weights_(self, policy_or_weights: Any | None = None) -> None:
        """Copy the trainer's weights into shared memory (in place) and bump the version.

        Every worker picks them up at the start of its next batch; with
        ``track_policy_version=True`` each batch records the version that produced it in
        ``"policy_version"`` and ``("next", "policy_version")``.

        The whole update is validated before anything is written (the same keys, exact
        shapes, floating values for floating weights, no NaN / inf); then it is copied
        under the lock the workers read under: a worker sees all of it or none of it, and
        the version moves only when it is written.

        Args:
            policy_or_weights: a module, a TensorDict of weights or a state_dict. ``None``:
                the policy given at construction (which the trainer optimises), else the
                weights the scheme's ``init_on_sender`` was given.

        Raises:
            ValueError: the weights do not match the policy's (missing or extra keys, a
                shape or dtype kind that differs, NaN / inf); nothing is changed.
        """
        if self._weights is None:
            if self._policy_factories is not None and self.weight_sync_scheme.enabled:
                raise ValueError(
                    "this collector's workers build their policies from policy_factory and the "
                    "parent holds no weights to sync them with: pass policy= (the trainer's "
                    "module) too, or call weight_sync_schemes['policy'].init_on_sender(model=...) "
                    "before building the collector."
                )
            return
        source = policy_or_weights
        if source is None:
            source = (
                self.policy if self.policy is not None else self.weight_sync_scheme.sender_source
            )
        self._weights.push(source, owner=f"{type(self).__name__}.update_policy_weights_")

    # -- iteration helpers ------------------------------------------------------------------
    def next(self) -> TensorDictBase | None:
        """The next batch (``None`` once ``total_frames`` are collected)."""
        if self._iterator is None:
            self._iterator = iter(self)
        try:
            return next(self._iterator)
        except StopIteration:
            return None

    def __len__(self) -> int:
        if self.total_frames < 0:
            raise TypeError("an endless collector (total_frames=-1) has no length.")
        return -(-self.total_frames // self.frames_per_batch)

    @property
    def frames(self) -> int:
        """Frames handed out so far."""
        return self._frames

    def _timings(self, indices: Sequence[int], frames: int, started: float) -> BatchTimings:
        worker = [self.worker_timings[i] for i in indices if self.worker_timings[i] is not None]
        return merge_timings(frames, worker, started)

    # -- seeding ----------------------------------------------------------------------------
    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed each worker's env in turn (``seed``, then the seed each returns), as TorchRL.

        Workers start every sub-env afresh at their next batch. Returns the seed after
        the last worker's (``seed + num_workers`` for envs that count up by one).
        """
        self._idle_check()
        for index in range(self.num_workers):
            seed = self._request(index, "set_seed", (seed, static_seed))
        return seed

    def reset(self) -> None:
        """Start every worker's sub-envs from a fresh reset at their next batch (and drop
        the trajectories ``trajs_per_batch`` was assembling)."""
        self._idle_check()
        if self._traj_assembly is not None:
            self._traj_assembly.clear()
        for index in range(self.num_workers):
            self._request(index, "reset")

    # -- checkpointing ----------------------------------------------------------------------
    def _idle_check(self) -> None:
        """Subclasses with batches in flight override this to refuse mid-flight checkpoints."""

    def state_dict(self) -> dict[str, Any]:
        """Counters, the weights and each worker's collector state under ``"worker<i>"``
        (TorchRL's layout; a worker's ``policy_state_dict`` holds the weights it will use).

        ``"traj_pool"`` (TorchRL's entry, with trajectory ids tracked) is
        ``{"traj_id": tensor}``: above every id the workers have given so far."""
        self._idle_check()
        state: dict[str, Any] = {
            "frames": self._frames,
            "iter": self._iter,
            "policy_version": self.policy_version,
        }
        for index in range(self.num_workers):
            state[f"worker{index}"] = self._request(index, "state_dict")
        pools = [state[f"worker{i}"].get("traj_pool") for i in range(self.num_workers)]
        if self.track_traj_ids and all(pool is not None for pool in pools):
            state["traj_pool"] = {"traj_id": max(pool["traj_id"] for pool in pools).clone()}
        if isinstance(self.policy, nn.Module):
            state["policy_state_dict"] = {
                k: v.detach().clone() for k, v in self.policy.state_dict().items()
            }
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume: frame accounting, trajectory ids and weights continue where they were."""
        self._idle_check()
        missing = [f"worker{i}" for i in range(self.num_workers) if f"worker{i}" not in state_dict]
        if missing:
            raise ValueError(
                f"load_state_dict: expected the states of {self.num_workers} workers under "
                f"'worker0'...; {missing} are missing. Pass the output of state_dict()."
            )
        workers = [state_dict[f"worker{i}"] for i in range(self.num_workers)]
        self._frames = int(state_dict["frames"])
        self._iter = int(state_dict["iter"])
        for index, worker_state in enumerate(workers):
            self._request(index, "load_state_dict", worker_state)
        if "policy_state_dict" in state_dict and isinstance(self.policy, nn.Module):
            self.policy.load_state_dict(state_dict["policy_state_dict"])
            if self._weights is not None:
                # The saved version continues (each worker's batches keep counting from it).
                self._weights.push(self.policy, version=int(state_dict.get("policy_version", 0)))
        self._iterator = None

    # -- lifecycle --------------------------------------------------------------------------
    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every worker (asking first, then terminating); safe to call twice.

        Workers stopped by ``SIGSTOP`` are killed at once (they would never read the
        request); the others get ``timeout`` seconds in all to finish their batch."""
        self._shutdown(timeout)

    def _shutdown(self, timeout: float, stuck: Sequence[int] = ()) -> None:
        if self._closed:
            return
        self._closed = True
        for stop in self._stops:
            stop.value = 1
        stopped = [
            i for i, p in enumerate(self._procs) if p.pid and process_state(p.pid) in ("T", "t")
        ]
        for index in {*stuck, *stopped}:
            with contextlib.suppress(OSError, ValueError):
                self._procs[index].kill()
        for conn, proc in zip(self._conns, self._procs, strict=False):
            if proc.is_alive():
                with contextlib.suppress(BrokenPipeError, OSError):
                    conn.send(("close", None))
        deadline = time.monotonic() + timeout
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.terminate()
                with contextlib.suppress(OSError):
                    os.kill(proc.pid, signal.SIGCONT)  # a stopped process takes SIGTERM only then
                proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self._conns:
            conn.close()
        for proc in self._procs:
            proc.close()
        self._buffers = [None] * self.num_workers

    def async_shutdown(self, timeout: float | None = None) -> None:
        """Stop the collection :meth:`start` began, then :meth:`shutdown`; re-raises an
        error the background thread met."""
        timeout = 10.0 if timeout is None else timeout
        self._stop_background(timeout)
        self.shutdown(timeout=timeout)
        self._raise_background_error()

    def fake_tensordict(self) -> TensorDictBase:
        """Not available for multiprocess collectors (their envs live in the workers).

        Raises:
            NotImplementedError: always; build a :class:`~rl_collectors.Collector` on one of
                the envs and call its ``fake_tensordict()``.
        """
        raise NotImplementedError(
            f"{type(self).__name__}.fake_tensordict() is not available: the envs live in the "
            "worker processes. Call Collector(make_env, policy, ...).fake_tensordict() instead."
        )

    def __enter__(self) -> MultiCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.shutdown(timeout=1.0)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_workers={self.num_workers}, env_batch_size="
            f"{tuple(getattr(self, 'env_batch_size', ()))}, frames_per_batch={self.frames_per_batch}, "
            f"total_frames={self.total_frames}, frames={self._frames})"
        )
