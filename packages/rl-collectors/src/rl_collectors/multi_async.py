"""``MultiAsyncCollector``: N worker processes collect continuously; whichever is ready is yielded."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from tensordict import TensorDictBase

from rl_collectors._batching import (
    finish_batch,
    fit_frames,
    frames_for_next_batch,
    make_progress_bar,
)
from rl_collectors._multi_base import MultiCollector

T = TypeVar("T")


class MultiAsyncCollector(MultiCollector):
    """Collect with N worker processes that never wait for each other.

    Every worker collects ``frames_per_batch`` frames, hands its batch over through
    shared memory and starts the next one at once; iteration yields the batch of
    whichever worker finished first, of shape ``[*env.batch_size, T]``. A batch may
    come from weights older than the latest update: with ``track_policy_version=True``,
    ``"policy_version"`` says which (off-policy algorithms use this collector).
    Arguments are those of :class:`~rl_collectors.MultiSyncCollector` except
    ``preemptive_threshold``; ``frames_per_batch`` is per yielded batch and ``cat_results``
    is accepted but unused (each batch is one worker's).

    Examples:
        >>> collector = MultiAsyncCollector(make_env, policy, num_workers=2,
        ...                                 frames_per_batch=100, total_frames=1000)  # doctest: +SKIP
        >>> for batch in collector:  # doctest: +SKIP
        ...     print(batch["policy_version"].max())
    """

    _synchronous = False

    def __init__(self, *args: Any, cat_results: str | int | None = None, **kwargs: Any) -> None:
        # cat_results is in TorchRL's shared signature; one worker's batch has nothing to join.
        self.cat_results = cat_results
        if "preemptive_threshold" in kwargs:
            raise TypeError(
                "preemptive_threshold applies to MultiSyncCollector only: an async collector "
                "never waits for slow workers."
            )
        self._in_flight: dict[int, int] = {}
        super().__init__(*args, **kwargs)

    def _worker_frames_per_batch(self) -> int:
        return self.frames_per_batch

    def _check_frames(self) -> None:
        self.frames_per_batch, self.total_frames = fit_frames(
            self.frames_per_batch,
            self.total_frames,
            self._env_numel,
            f"env batch size {tuple(self.env_batch_size)}",
        )

    def _idle_check(self) -> None:
        if self._in_flight:
            raise RuntimeError(
                f"workers {sorted(self._in_flight)} are collecting; checkpoint, seed or reset an async collector "
                "once its iteration has finished (or before it starts)."
            )

    def _restart_in_flight(self, action: Callable[[], T]) -> T:
        """Wait for the batches in flight, drop them, run ``action`` (seeding, a reset),
        then send the same workers collecting again: every batch yielded afterwards is
        collected wholly after ``action``, as a restart should be."""
        in_flight = sorted(self._in_flight)
        while self._in_flight:
            index, message = self._receive(set(self._in_flight))
            del self._in_flight[index]
            if message[1] is not None:
                self._buffers[index] = message[1]  # a new buffer the worker will write to
        result = action()
        for index in in_flight:
            self._dispatch(index)
        return result

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed every worker's env (see :meth:`MultiCollector.set_seed`). Called while
        iterating, it drops the batches in flight (collected under the old seed)."""
        return self._restart_in_flight(
            lambda: super(MultiAsyncCollector, self).set_seed(seed, static_seed)
        )

    def reset(self) -> None:
        """Start every worker's sub-envs afresh; while iterating, drops the batches in flight."""
        self._restart_in_flight(lambda: super(MultiAsyncCollector, self).reset())

    def _dispatch(self, index: int) -> None:
        scheduled = self._frames + sum(self._in_flight.values())
        frames = frames_for_next_batch(self.frames_per_batch, self.total_frames, scheduled)
        if frames:
            self._stops[index].value = 0
            self._send(index, "collect", frames // self._env_numel)
            self._in_flight[index] = frames

    def _batches(self) -> Iterator[TensorDictBase | None]:
        bar = make_progress_bar(self.progress_bar, self.total_frames, self._frames)
        try:
            for index in range(self.num_workers):
                if index not in self._in_flight:
                    self._dispatch(index)
            while self._in_flight:
                started = time.perf_counter()
                index, message = self._receive(set(self._in_flight))
                del self._in_flight[index]
                written = self._take_batch(index, message)
                batch = self._buffers[index][..., :written].clone()
                if self._non_tensor[index]:
                    batch.update(self._non_tensor[index])
                collected = written * self._env_numel
                self._frames += collected
                self._dispatch(index)
                if batch.device != self.storing_device:
                    batch = batch.to(self.storing_device)
                self._iter += 1
                self.last_timings = self._timings([index], collected, started)
                if bar is not None:
                    bar.update(collected)
                yield finish_batch(
                    batch,
                    split_trajs=self.split_trajs,
                    flatten=self.flatten,
                    postproc=self.postproc,
                    replay_buffer=self._batch_replay_buffer,
                    extend_buffer=self.extend_buffer,
                    keep_traj_ids=self.track_traj_ids,
                    exclude_private_keys=self._exclude_private_keys,
                )
        finally:
            if bar is not None:
                bar.close()


MultiaSyncDataCollector = MultiAsyncCollector
MultiAsyncDataCollector = MultiAsyncCollector


class AsyncCollector(MultiAsyncCollector):
    """One env collected in one worker process while the trainer works (TorchRL's name).

    A :class:`MultiAsyncCollector` with a single worker: ``create_env_fn`` is one env or
    constructor and ``create_env_kwargs`` one dict; the other arguments are the same.

    Examples:
        >>> collector = AsyncCollector(make_env, policy, frames_per_batch=100,
        ...                            total_frames=1000)  # doctest: +SKIP
        >>> for batch in collector:  # doctest: +SKIP
        ...     train(batch)
    """

    def __init__(
        self,
        create_env_fn: Any,
        policy: Any = None,
        *,
        create_env_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            [create_env_fn],
            policy,
            create_env_kwargs=None if create_env_kwargs is None else [create_env_kwargs],
            **kwargs,
        )
