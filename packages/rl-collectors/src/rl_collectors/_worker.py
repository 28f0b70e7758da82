"""The loop a multiprocess collector worker runs: its own env and ``Collector``, shared buffers."""

from __future__ import annotations

import contextlib
import pickle
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from rl_collectors._procwatch import die_with_parent
from rl_collectors._weights import SharedWeights
from rl_collectors.collector import Collector


@dataclass
class WorkerSpec:
    """What a worker needs to build its collector (pickled once, at start)."""

    index: int
    num_workers: int
    create_env_fn: Any
    create_env_kwargs: dict[str, Any]
    policy_bytes: bytes | None
    frames_per_batch: int
    collector_kwargs: dict[str, Any] = field(default_factory=dict)
    num_threads: int = 1
    preemptive: bool = False  # poll the stop flag at every step (else whole rollouts)
    hooks_bytes: bytes | None = None  # pickled (pre_collect_hook, post_collect_hook)
    policy_is_factory: bool = False  # policy_bytes holds a callable building the policy
    parent_pid: int = 0  # the collector's process: the worker ends when it does (0: no watch)
    pdeathsig: bool = True  # also ask Linux for SIGKILL when the parent goes (see _procwatch)


def build_worker_collector(spec: WorkerSpec, shared_buffer: bool) -> Collector:
    """The worker's own ``Collector``: endless, disjoint trajectory ids, version tracking."""
    policy = pickle.loads(spec.policy_bytes) if spec.policy_bytes is not None else None
    factory = {"policy_factory": policy} if spec.policy_is_factory else {"policy": policy}
    with warnings.catch_warnings():
        # The parent rounds the batch up and warns once; the worker's share follows silently.
        warnings.filterwarnings("ignore", "frames_per_batch=", UserWarning)
        collector = Collector(
            spec.create_env_fn,
            **factory,
            frames_per_batch=spec.frames_per_batch,
            total_frames=-1,
            create_env_kwargs=spec.create_env_kwargs,
            return_same_td=True,
            worker_idx=spec.index,
            **{"track_policy_version": True, **spec.collector_kwargs},
        )
    _set_hooks(collector, spec.hooks_bytes)
    collector._configure_worker(spec.index, spec.num_workers, shared_buffer)
    return collector


def _set_hooks(collector: Collector, hooks_bytes: bytes | None) -> None:
    hooks = (None, None) if hooks_bytes is None else pickle.loads(hooks_bytes)
    collector.pre_collect_hook, collector.post_collect_hook = hooks


def worker_main(spec: WorkerSpec, conn: Any, weights: SharedWeights | None, stop: Any) -> None:
    """Serve ``("collect", steps)``, ``("state_dict", None)``, ``("load_state_dict", sd)``,
    ``("set_seed", (seed, static_seed))``, ``("reset", None)``, ``("set_hooks", bytes)``,
    ``("getattr", name)``, ``("call", (method, args, kwargs))`` and ``("close", None)``.

    Replies ``("ready", batch_size)`` once (or ``("config_error", type, message)`` if the
    collector cannot be built from these arguments), then ``("batch", buffer_or_None, steps_written, timings, non_tensor_or_None)``
    per collect (the shared buffer is sent only when it is new). Any exception is sent back as
    ``("error", traceback)`` before the process exits; a closed pipe (parent gone) ends it quietly.
    """
    if spec.parent_pid:
        die_with_parent(spec.parent_pid, spec.pdeathsig)
    torch.set_num_threads(spec.num_threads)
    collector: Collector | None = None
    try:
        try:
            collector = build_worker_collector(spec, shared_buffer=True)
        except (ValueError, TypeError) as err:
            # A configuration error: the parent re-raises it as such, not as a crash.
            conn.send(("config_error", type(err).__name__, str(err)))
            return
        conn.send(("ready", tuple(collector.batch_size)))
        should_stop = (lambda: stop.value != 0) if spec.preemptive else None
        held_version = 0
        sent_generation = 0
        while True:
            command, argument = conn.recv()
            if command == "collect":
                if weights is not None and collector.policy is not None:
                    held_version = weights.pull(collector.policy, held_version)
                collector.policy_version = held_version
                if collector.pre_collect_hook is not None:
                    collector.pre_collect_hook()
                written = collector._collect(argument, should_stop=should_stop)
                if collector.post_collect_hook is not None:
                    collector.post_collect_hook(collector._buffer.data[..., :written])
                buffer = None
                if collector._buffer_generation != sent_generation:
                    buffer = collector._buffer.data
                    sent_generation = collector._buffer_generation
                non_tensor = (
                    collector._buffer.non_tensor(written)
                    if collector._buffer.non_tensor_keys
                    else None
                )
                conn.send(("batch", buffer, written, collector.last_timings, non_tensor))
            elif command == "state_dict":
                if weights is not None and collector.policy is not None:
                    held_version = weights.pull(collector.policy, held_version)
                    collector.policy_version = held_version
                conn.send(("state", collector.state_dict()))
            elif command == "load_state_dict":
                collector.load_state_dict(argument)
                conn.send(("ok", None))
            elif command == "set_seed":
                conn.send(("seed", collector.set_seed(*argument)))
            elif command == "reset":
                collector.reset()
                conn.send(("ok", None))
            elif command == "set_hooks":
                _set_hooks(collector, argument)
                conn.send(("ok", None))
            elif command == "getattr":
                conn.send(("value", getattr(collector, argument)))
            elif command == "call":
                name, args, kwargs = argument
                conn.send(("value", collector.map_fn(name, [args], [kwargs])[0]))
            elif command == "close":
                break
            else:
                raise ValueError(f"worker {spec.index}: unknown command {command!r}")
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass
    except BaseException:
        with contextlib.suppress(OSError, EOFError):
            conn.send(("error", traceback.format_exc()))
    finally:
        if collector is not None:
            with contextlib.suppress(Exception):
                collector.shutdown()
        conn.close()
