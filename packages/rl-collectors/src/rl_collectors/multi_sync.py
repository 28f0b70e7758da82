"""``MultiSyncCollector``: N worker processes collect in lock-step; batches are stacked."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_collectors._batching import (
    finish_batch,
    fit_frames,
    frames_for_next_batch,
    make_progress_bar,
    mark_invalid_tail,
)
from rl_collectors._multi_base import MultiCollector


class MultiSyncCollector(MultiCollector):
    """Collect with N worker processes; every batch holds one piece from each worker.

    Each iteration asks every worker for ``frames_per_batch / N`` frames, waits for
    them and yields one TensorDict of shape ``[N, *env.batch_size, T]`` (or the
    ``flatten`` / ``split_trajs`` forms). Workers only collect when asked, so
    weights updated between two iterations produce the whole next batch
    (with ``track_policy_version=True``, ``"policy_version"`` says which version did).

    Args:
        create_env_fn: an env or a picklable env constructor (with ``num_workers``), or one
            per worker; env instances are pickled to their worker (each steps its own copy).
        policy: a ``TensorDict -> TensorDict`` callable (pickled once to each worker) or ``None``
            for random actions. With ``policy_factory`` it stays in the parent as the
            source of the weights ``update_policy_weights_()`` syncs.
        policy_factory: a callable building the policy in each worker (nothing of it is
            built in the parent), or one per worker, as TorchRL.
        num_workers: how many workers when one constructor is given.
        frames_per_batch: frames per batch, all workers together; or one count per worker
            (TorchRL's sequence form: worker ``i`` collects ``frames_per_batch[i]``, and a
            stacked batch marks the steps a shorter share lacks as preemption does).
        total_frames: frames in all (``-1``: endless). Both counts are rounded up (with a
            warning) to whole steps of every worker's env, as in TorchRL.
        preemptive_threshold: once this fraction of the workers has finished, the others
            stop early; the steps they did not collect are flagged by
            ``("collector", "traj_ids") == -1`` and ``("collector", "mask") == False``
            (a mask present in every batch when this is set). ``0.0`` stops the others as
            soon as one worker is done; ``1.0`` (or ``None``) never preempts, and then
            ``interruptor`` is ``None``.
        cat_results: ``None`` or ``"stack"`` stacks the workers' pieces along a new leading
            dim (``[N, *env.batch_size, T]``); an int concatenates them along that dim of a
            piece (``-1``: ``[*env.batch_size, N * T]``), as TorchRL.
        **kwargs: the remaining options of :class:`~rl_collectors.Collector` (devices,
            ``max_frames_per_traj``, ``init_random_frames`` (split among workers),
            ``reset_at_each_iter``, ``postproc``, ``split_trajs``, ``exploration_type``,
            ``replay_buffer``, ``flatten``, ``progress_bar``, ``track_traj_ids``,
            ``track_policy_version``, the hooks,
            ``trust_policy``, ``compile_policy``, ``cudagraph_policy``, ``set_truncated``
            (each worker's last step of each batch)), plus
            ``mp_start_method`` (default ``forkserver`` where available), ``num_sub_threads``
            and ``weight_sync_schemes`` (``{"policy": scheme}``, see
            :mod:`rl_collectors.weight_sync`).
        timeout: seconds the parent waits for a worker's answer to one command (for a
            collect: the worker's whole share of a batch) before raising
            :class:`~rl_collectors.WorkerTimeoutError` naming the worker, its pid, the
            command and its process state (e.g. stopped by ``SIGSTOP``); the collector is
            then shut down. Default 300; ``math.inf`` waits forever (``None`` is refused).

    Examples:
        >>> collector = MultiSyncCollector([make_env, make_env], policy, frames_per_batch=200,
        ...                                total_frames=1000)  # doctest: +SKIP
        >>> for batch in collector:  # doctest: +SKIP
        ...     train(batch)
        ...     collector.update_policy_weights_()
        >>> collector.shutdown()  # doctest: +SKIP
    """

    _synchronous = True

    def __init__(
        self,
        create_env_fn: Callable[..., Any] | Sequence[Callable[..., Any]],
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        frames_per_batch: int | Sequence[int],
        total_frames: int = -1,
        preemptive_threshold: float | None = None,
        cat_results: str | int | None = None,
        **kwargs: Any,
    ) -> None:
        if cat_results is not None and cat_results != "stack" and not isinstance(cat_results, int):
            raise ValueError(
                f"cat_results must be None, 'stack' or an int dim to concatenate along; got {cat_results!r}."
            )
        self.cat_results = cat_results
        if preemptive_threshold is not None and not 0.0 <= preemptive_threshold <= 1.0:
            raise ValueError(f"preemptive_threshold must be in [0, 1]; got {preemptive_threshold}.")
        self.preemptive_threshold = preemptive_threshold
        self._preempt = preemptive_threshold is not None and preemptive_threshold < 1.0
        super().__init__(
            create_env_fn,
            policy,
            frames_per_batch=frames_per_batch,
            total_frames=total_frames,
            **kwargs,
        )

    @property
    def interruptor(self) -> _StopFlags | None:
        """The workers' stop flags while preemption is on (``None`` otherwise, as TorchRL)."""
        return _StopFlags(self._stops) if self._preempt else None

    def _worker_frames_per_batch(self) -> int:
        # Each worker's share, rounded up; the worker rounds it up to its env's batch numel.
        if self._frames_per_worker is not None:
            return max(self._frames_per_worker)
        return -(-self.frames_per_batch // self.num_workers)

    def _check_frames(self) -> None:
        unit = self.num_workers * self._env_numel
        what = f"{self.num_workers} workers x env batch size {tuple(self.env_batch_size)}"
        if self._preempt:
            # Shares may be unequal (the mask covers them): total_frames need only fill env steps.
            self.frames_per_batch, _ = fit_frames(self.frames_per_batch, -1, unit, what)
            _, self.total_frames = fit_frames(
                self.frames_per_batch, self.total_frames, self._env_numel, what
            )
        else:
            self.frames_per_batch, self.total_frames = fit_frames(
                self.frames_per_batch, self.total_frames, unit, what
            )

    def _plan(self, frames: int) -> list[int]:
        """Steps per worker for a batch of ``frames`` frames: the per-worker counts when
        ``frames_per_batch`` was a sequence (full batches), else as equal as possible."""
        if self._frames_per_worker is not None and frames == self.frames_per_batch:
            return [-(-share // self._env_numel) for share in self._frames_per_worker]
        steps = frames // self._env_numel
        base, extra = divmod(steps, self.num_workers)
        return [base + (1 if index < extra else 0) for index in range(self.num_workers)]

    def _pieces(self, steps: int) -> list[TensorDictBase]:
        """The first ``steps`` steps of every worker's buffer (zeros for a worker that never ran)."""
        known = next(buffer for buffer in self._buffers if buffer is not None)
        return [
            (buffer if buffer is not None else known.new_zeros(known.shape))[..., :steps]
            for buffer in self._buffers
        ]

    def _attach_non_tensor(self, batch: TensorDictBase, written: list[int]) -> None:
        """Set the workers' non-tensor leaves (sent through the pipes) on the stacked batch,
        when every worker wrote the same number of steps (no preemption cut)."""
        pieces = self._non_tensor
        if not pieces[0] or len(set(written)) != 1 or any(p is None for p in pieces):
            return
        for key in pieces[0]:
            batch.set(key, torch.stack([piece[key] for piece in pieces], 0))

    def _extends_per_worker(self) -> bool:
        """Whether each worker's piece goes to the replay buffer by itself, as TorchRL's
        workers each extend the shared buffer with their own ``[*env.batch_size, T]`` batch
        (so a buffer of flat steps holds ``frames_per_batch`` new entries per batch)."""
        return self._batch_replay_buffer is not None and self.extend_buffer and not self.flatten

    def _batches(self) -> Iterator[TensorDictBase | None]:
        bar = make_progress_bar(self.progress_bar, self.total_frames, self._frames)
        preempt_after = (
            max(1, math.ceil(self.preemptive_threshold * self.num_workers))
            if self._preempt
            else self.num_workers
        )
        try:
            while True:
                frames = frames_for_next_batch(
                    self.frames_per_batch, self.total_frames, self._frames
                )
                if frames == 0:
                    return
                started = time.perf_counter()
                plan = self._plan(frames)
                active = [index for index, steps in enumerate(plan) if steps > 0]
                for index in active:
                    self._stops[index].value = 0
                    self._send(index, "collect", plan[index])
                written = dict.fromkeys(range(self.num_workers), 0)
                pending = set(active)
                while pending:
                    index, message = self._receive(pending)
                    pending.discard(index)
                    written[index] = self._take_batch(index, message)
                    if self._preempt and len(active) - len(pending) >= preempt_after:
                        for other in pending:
                            self._stops[other].value = 1
                steps = max(plan)
                batch = torch.stack(self._pieces(steps), 0)
                self._attach_non_tensor(batch, [written[i] for i in range(self.num_workers)])
                if self._preempt or len(set(plan)) > 1:
                    mark_invalid_tail(batch, [written[i] for i in range(self.num_workers)])
                if batch.device != self.storing_device:
                    batch = batch.to(self.storing_device)
                pieces = None
                if self._extends_per_worker():
                    pieces = batch.unbind(0)
                elif self.cat_results not in (None, "stack"):
                    batch = torch.cat(batch.unbind(0), self.cat_results)
                collected = sum(written.values()) * self._env_numel
                self._frames += collected
                self._iter += 1
                self.last_timings = self._timings(active, collected, started)
                if bar is not None:
                    bar.update(collected)
                options = {
                    "split_trajs": self.split_trajs,
                    "flatten": self.flatten,
                    "postproc": self.postproc,
                    "replay_buffer": self._batch_replay_buffer,
                    "extend_buffer": self.extend_buffer,
                    "keep_traj_ids": self.track_traj_ids,
                    "exclude_private_keys": self._exclude_private_keys,
                }
                if pieces is None:
                    yield finish_batch(batch, **options)
                    continue
                for piece in pieces:
                    finish_batch(piece, **options)
                yield None
        finally:
            if bar is not None:
                bar.close()


class _StopFlags:
    """TorchRL's interruptor interface over the workers' shared stop flags."""

    def __init__(self, flags: list[Any]) -> None:
        self._flags = flags

    def stop_collection(self) -> None:
        for flag in self._flags:
            flag.value = 1

    def start_collection(self) -> None:
        for flag in self._flags:
            flag.value = 0

    def collection_stopped(self) -> bool:
        return all(flag.value for flag in self._flags)


MultiSyncDataCollector = MultiSyncCollector
