"""``RayCollector``: the collector interface with workers as Ray actors (one machine or a cluster).

Each actor builds its env and its own :class:`~rl_collectors.Collector`.
Weights travel through the Ray object store: one ``ray.put`` per update,
every actor reads the same object (no module pickled per update). Ray is
the optional extra ``rl-collectors[ray]``.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType
from torch import nn

from rl_collectors._batching import (
    BatchTimings,
    check_options,
    finish_batch,
    fit_frames,
    frames_for_next_batch,
    make_progress_bar,
    merge_timings,
)
from rl_collectors._multi_base import WorkerError
from rl_collectors._policy import load_weights_, module_weights, resolve_exploration_type
from rl_collectors._worker import WorkerSpec, build_worker_collector

DeviceLike = torch.device | str | int | None


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError("RayCollector needs Ray: pip install 'rl-collectors[ray]'.") from err
    return ray


class RayCollectorWorker:
    """What runs inside each Ray actor: an endless ``Collector`` serving ``collect(steps)``."""

    def __init__(self, spec: WorkerSpec) -> None:
        torch.set_num_threads(spec.num_threads)
        self.collector = build_worker_collector(spec, shared_buffer=False)

    def batch_size(self) -> tuple[int, ...]:
        return tuple(self.collector.batch_size)

    def collect(self, steps: int) -> tuple[TensorDictBase, BatchTimings]:
        written = self.collector._collect(steps)
        return self.collector._buffer.data[..., :written].clone(), self.collector.last_timings

    def set_weights(self, weights: TensorDictBase, version: int) -> int:
        load_weights_(self.collector.policy, weights)
        self.collector.policy_version = version
        return version

    def state_dict(self) -> dict[str, Any]:
        return self.collector.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.collector.load_state_dict(state_dict)

    def set_seed(self, seed: int, static_seed: bool) -> int:
        return self.collector.set_seed(seed, static_seed)

    def reset(self) -> None:
        self.collector.reset()

    def shutdown(self) -> None:
        self.collector.shutdown()


def _actor_envs(
    create_env_fn: Callable[..., Any] | Sequence[Callable[..., Any]], num_collectors: int | None
) -> list[Callable[..., Any]]:
    """One env constructor per actor.

    Raises:
        ValueError: neither a list nor ``num_collectors``, or no actor at all.
    """
    if isinstance(create_env_fn, Sequence):
        env_fns = list(create_env_fn)
    elif num_collectors is not None:
        env_fns = [create_env_fn] * num_collectors
    else:
        raise ValueError("pass a list of env constructors or one constructor and num_collectors.")
    if not env_fns:
        raise ValueError("a RayCollector needs at least one actor.")
    return env_fns


class RayCollector:
    """Collect with Ray actors, synchronously (stacked ``[N, *B, T]``) or not (``[*B, T]``).

    Args:
        create_env_fn: an env constructor (with ``num_collectors``) or one per actor; it is
            serialised by Ray (cloudpickle), so it may be a lambda.
        policy: ``TensorDict -> TensorDict`` callable or ``None`` (random actions).
        num_collectors: number of actors when one constructor is given.
        frames_per_batch: frames per batch (all actors together when ``sync=True``, one
            actor's batch when ``sync=False``).
        total_frames: frames in all (``-1``: endless); both counts are rounded up (with a
            warning) to whole steps of the actors' envs, as in TorchRL.
        sync: stack one piece from every actor per batch (``True``), or yield each actor's
            batch as soon as it is ready (``False``).
        ray_init_config: keyword arguments for ``ray.init`` when Ray is not initialised yet,
            e.g. ``{"address": "auto"}`` to join a running cluster.
        remote_config: Ray actor options (``num_cpus``, ``num_gpus``, ``resources``...).
            Defaults to ``{"num_cpus": 1}``.
        **kwargs: the options of :class:`~rl_collectors.Collector` (devices,
            ``max_frames_per_traj``, ``init_random_frames`` (split among actors),
            ``reset_at_each_iter``, ``postproc``, ``split_trajs``, ``exploration_type``,
            ``replay_buffer``, ``flatten``, ``progress_bar``) and ``num_sub_threads``.

    Examples:
        >>> collector = RayCollector(make_env, policy, num_collectors=2, frames_per_batch=200,
        ...                          total_frames=1000, ray_init_config={"address": "auto"})  # doctest: +SKIP
    """

    def __init__(
        self,
        create_env_fn: Callable[..., Any] | Sequence[Callable[..., Any]],
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        num_collectors: int | None = None,
        frames_per_batch: int,
        total_frames: int = -1,
        sync: bool = True,
        ray_init_config: dict[str, Any] | None = None,
        remote_config: dict[str, Any] | None = None,
        device: DeviceLike = None,
        storing_device: DeviceLike = None,
        policy_device: DeviceLike = None,
        env_device: DeviceLike = None,
        create_env_kwargs: dict[str, Any] | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool = False,
        exploration_type: InteractionType | str = InteractionType.RANDOM,
        replay_buffer: Any | None = None,
        flatten: bool = False,
        progress_bar: bool = False,
        num_sub_threads: int = 1,
    ) -> None:
        check_options(split_trajs, flatten)
        self._closed = True
        ray = _import_ray()
        env_fns = _actor_envs(create_env_fn, num_collectors)
        self.num_collectors = len(env_fns)
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.sync = sync
        self.policy = policy
        self.postproc = postproc
        self.split_trajs = split_trajs
        self.flatten = flatten
        self.replay_buffer = replay_buffer
        self.progress_bar = progress_bar
        self.storing_device = torch.device(storing_device or device or "cpu")
        self.policy_version = 0
        self.last_timings: BatchTimings | None = None
        self._frames = 0
        self._iter = 0
        self._iterator: Iterator[TensorDictBase | None] | None = None
        self._in_flight: dict[Any, tuple[int, int]] = {}
        worker_frames = self._actor_frames_per_batch()
        if not ray.is_initialized():
            ray.init(**(ray_init_config or {}))
        self._ray = ray
        collector_kwargs = {
            "device": device,
            "policy_device": policy_device,
            "env_device": env_device,
            "max_frames_per_traj": max_frames_per_traj,
            "init_random_frames": math.ceil((init_random_frames or 0) / self.num_collectors),
            "reset_at_each_iter": reset_at_each_iter,
            "exploration_type": resolve_exploration_type(exploration_type),
            "storing_device": "cpu",
        }
        # cloudpickle (Ray's serialiser) so that policies defined in scripts travel too
        policy_bytes = ray.cloudpickle.dumps(policy) if policy is not None else None
        specs = [
            WorkerSpec(
                index=index,
                num_workers=self.num_collectors,
                create_env_fn=fn,
                create_env_kwargs=dict(create_env_kwargs or {}),
                policy_bytes=policy_bytes,
                frames_per_batch=worker_frames,
                collector_kwargs=collector_kwargs,
                num_threads=num_sub_threads,
            )
            for index, fn in enumerate(env_fns)
        ]
        self._start_actors(specs, remote_config)
        self.env_batch_size = self._await_env_batch_size()
        self._env_numel = self.env_batch_size.numel()
        try:
            self._check_frames()
        except ValueError:
            self.shutdown()
            raise

    def _actor_frames_per_batch(self) -> int:
        """Frames each actor collects per call: an equal share with ``sync``, else a batch."""
        if not self.sync:
            return self.frames_per_batch
        # An equal share, rounded up; each actor rounds it up to its env's batch numel.
        return -(-self.frames_per_batch // self.num_collectors)

    def _start_actors(self, specs: list[WorkerSpec], remote_config: dict[str, Any] | None) -> None:
        """One Ray actor per spec (``remote_config``: Ray's resource options, 1 CPU each)."""
        actor_class = self._ray.remote(**(remote_config or {"num_cpus": 1}))(RayCollectorWorker)
        self._actors = [actor_class.remote(spec) for spec in specs]
        self._closed = False

    def _await_env_batch_size(self) -> torch.Size:
        """The actors' common env batch size; actors whose envs differ raise a ``ValueError``."""
        sizes = self._get([actor.batch_size.remote() for actor in self._actors])
        if len(set(sizes)) != 1:
            self.shutdown()
            raise ValueError(
                f"the actors' envs have different batch sizes {sizes}; they must match."
            )
        return torch.Size(sizes[0])

    def _check_frames(self) -> None:
        unit = self._env_numel * (self.num_collectors if self.sync else 1)
        self.frames_per_batch, self.total_frames = fit_frames(
            self.frames_per_batch,
            self.total_frames,
            unit,
            f"actors x env batch {tuple(self.env_batch_size)}",
        )

    def _get(self, refs: Any) -> Any:
        try:
            return self._ray.get(refs)
        except self._ray.exceptions.RayError as err:
            self.shutdown()
            raise WorkerError(f"a RayCollector actor failed:\n{err}") from err

    # -- weights ----------------------------------------------------------------------------
    def update_policy_weights_(self, policy_or_weights: Any | None = None) -> None:
        """Put the trainer's weights in the object store once; every actor loads them in place."""
        source = self.policy if policy_or_weights is None else policy_or_weights
        if source is None or (policy_or_weights is None and not isinstance(self.policy, nn.Module)):
            return
        weights = module_weights(source).clone() if isinstance(source, nn.Module) else source
        self.policy_version += 1
        ref = self._ray.put(weights)
        # Actor calls from one caller run in order: the next collect sees these weights.
        self._get([actor.set_weights.remote(ref, self.policy_version) for actor in self._actors])

    # -- iteration --------------------------------------------------------------------------
    def __iter__(self) -> Iterator[TensorDictBase | None]:
        bar = make_progress_bar(self.progress_bar, self.total_frames, self._frames)
        try:
            yield from (self._iter_sync(bar) if self.sync else self._iter_async(bar))
        finally:
            if bar is not None:
                bar.close()

    def _finish(
        self,
        batch: TensorDictBase,
        frames: int,
        timings: list[BatchTimings],
        started: float,
        bar: Any,
    ) -> TensorDictBase | None:
        if batch.device != self.storing_device:
            batch = batch.to(self.storing_device)
        self._frames += frames
        self._iter += 1
        self.last_timings = merge_timings(frames, timings, started)
        if bar is not None:
            bar.update(frames)
        return finish_batch(
            batch,
            split_trajs=self.split_trajs,
            flatten=self.flatten,
            postproc=self.postproc,
            replay_buffer=self.replay_buffer,
        )

    def _iter_sync(self, bar: Any) -> Iterator[TensorDictBase | None]:
        while True:
            frames = frames_for_next_batch(self.frames_per_batch, self.total_frames, self._frames)
            if frames == 0:
                return
            started = time.perf_counter()
            steps = frames // (self._env_numel * self.num_collectors)
            results = self._get([actor.collect.remote(steps) for actor in self._actors])
            batch = torch.stack([piece for piece, _ in results], 0)
            yield self._finish(batch, frames, [t for _, t in results], started, bar)

    def _dispatch(self, index: int, received: int = 0) -> None:
        """Start the actor's next batch; ``received`` counts frames in hand but not yet handed out."""
        scheduled = self._frames + received + sum(frames for _, frames in self._in_flight.values())
        frames = frames_for_next_batch(self.frames_per_batch, self.total_frames, scheduled)
        if frames:
            ref = self._actors[index].collect.remote(frames // self._env_numel)
            self._in_flight[ref] = (index, frames)

    def _iter_async(self, bar: Any) -> Iterator[TensorDictBase | None]:
        busy = {index for index, _ in self._in_flight.values()}
        for index in range(self.num_collectors):
            if index not in busy:
                self._dispatch(index)
        while self._in_flight:
            started = time.perf_counter()
            ready, _ = self._ray.wait(list(self._in_flight), num_returns=1)
            index, frames = self._in_flight.pop(ready[0])
            piece, timings = self._get(ready[0])
            self._dispatch(index, received=frames)
            yield self._finish(piece, frames, [timings], started, bar)

    def next(self) -> TensorDictBase | None:
        """The next batch (``None`` once ``total_frames`` are collected)."""
        if self._iterator is None:
            self._iterator = iter(self)
        try:
            return next(self._iterator)
        except StopIteration:
            return None

    @property
    def frames(self) -> int:
        """Frames handed out so far."""
        return self._frames

    # -- seeding ----------------------------------------------------------------------------
    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed each actor's env in turn (``seed``, then the seed each returns), as TorchRL."""
        self._check_idle()
        for actor in self._actors:
            seed = self._get([actor.set_seed.remote(seed, static_seed)])[0]
        return seed

    def reset(self) -> None:
        """Start every actor's sub-envs from a fresh reset at their next batch."""
        self._check_idle()
        self._get([actor.reset.remote() for actor in self._actors])

    # -- checkpointing ----------------------------------------------------------------------
    def _check_idle(self) -> None:
        if self._in_flight:
            raise RuntimeError("actors are collecting; call this once the iteration has finished.")

    def state_dict(self) -> dict[str, Any]:
        """Counters, weights version and every actor's collector state."""
        self._check_idle()
        return {
            "frames": self._frames,
            "iter": self._iter,
            "policy_version": self.policy_version,
            "workers": self._get([actor.state_dict.remote() for actor in self._actors]),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume frame accounting and trajectory ids from :meth:`state_dict`."""
        workers = state_dict["workers"]
        if len(workers) != self.num_collectors:
            raise ValueError(f"expected {self.num_collectors} actor states, got {len(workers)}.")
        self._frames = int(state_dict["frames"])
        self._iter = int(state_dict["iter"])
        self.policy_version = int(state_dict.get("policy_version", 0))
        self._get([a.load_state_dict.remote(s) for a, s in zip(self._actors, workers, strict=True)])
        self._iterator = None

    # -- lifecycle --------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Kill the actors (Ray itself stays up: ``ray.shutdown()`` is the caller's call)."""
        if self._closed:
            return
        self._closed = True
        for actor in self._actors:
            with contextlib.suppress(Exception):
                self._ray.kill(actor)
        self._actors = []
        self._in_flight.clear()

    def __enter__(self) -> RayCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (
            f"RayCollector(num_collectors={self.num_collectors}, sync={self.sync}, "
            f"frames_per_batch={self.frames_per_batch}, total_frames={self.total_frames}, "
            f"frames={self._frames})"
        )
