"""The loop every off-policy recipe shares (DQN, DDPG, TD3, SAC); the recipes keep what differs.

A recipe builds its networks, loss, optimizers and one ``update(sample)`` function (one
gradient step, returning the scalars to log), then hands them to :func:`train_off_policy`
in an :class:`OffPolicyRun`. The loop collects a batch, stores it in the replay buffer,
runs ``num_updates`` updates once ``init_random_frames`` are collected, evaluates every
``eval_every`` frames, checkpoints every ``checkpoint_every`` frames (everything in
``stateful``, the buffer, the collector with the env's live state, the counters), keeps
the best evaluation's checkpoint (``best.pt``), saves a final checkpoint when it stops
(budget, target or Ctrl-C) and resumes from ``cfg.resume`` exactly where a run stopped.

Example (the skeleton of a recipe's ``main``)::

    run = OffPolicyRun(
        algo="sac", collector=collector, buffer=buffer, update=update,
        num_updates=cfg.frames_per_batch, eval_env=eval_env, eval_policy=actor,
        stateful={"loss": loss_fn, "optim": optim},
    )
    return train_off_policy(cfg, run)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from _common import (
    RunConfig,
    RunKeeper,
    RunLogger,
    Stopwatch,
    buffer_state_dict,
    counters_state,
    evaluate,
    finish_run,
    load_buffer_state_dict,
    load_checkpoint,
    run_counters,
    run_folder,
)

STORED_KEYS = ("observation", "action", "next")
"""What the off-policy losses read from a transition (the policy's extra outputs are dropped)."""

RESERVED = {"buffer", "collector", "config", "frames", "wall", "eval_return", "next_eval",
            "next_ckpt", "rng", "best"}  # fmt: skip
"""Checkpoint entries the loop writes itself."""


@dataclass
class OffPolicyRun:
    """What differs between off-policy recipes, handed to :func:`train_off_policy`."""

    algo: str
    """Name in the summary and the plot's title (``"dqn"``)."""
    collector: Any
    """Yields batches of ``frames_per_batch`` transitions (random actions first)."""
    buffer: Any
    """Replay buffer with a ``batch_size``: ``sample()`` draws one minibatch."""
    update: Callable[[Any], Mapping[str, torch.Tensor | float]]
    """One gradient step on a sampled minibatch; returns scalars to log (the batch's last)."""
    num_updates: int
    """Gradient steps after each collected batch."""
    eval_env: Any
    """Separate env for the deterministic evaluations."""
    eval_policy: Any
    """Policy evaluated (its mode: greedy, no exploration noise)."""
    stateful: dict[str, Any]
    """Checkpointed objects by name (``state_dict`` / ``load_state_dict``): loss, optimizers, ..."""
    on_batch: Callable[[Any], None] | None = field(default=None)
    """Called on every collected batch before the updates (e.g. anneal the exploration)."""


def _item(value: torch.Tensor | float) -> float:
    return float(value.detach()) if isinstance(value, torch.Tensor) else float(value)


def train_off_policy(cfg: RunConfig, run: OffPolicyRun) -> dict[str, object]:
    """Collect, store, update, evaluate, checkpoint; return the run's summary.

    ``cfg`` needs, beyond :class:`RunConfig`'s fields, ``env``, ``total_frames`` and
    ``init_random_frames``.
    """
    clash = RESERVED & set(run.stateful)
    if clash:
        raise ValueError(f"stateful names {sorted(clash)} clash with the checkpoint's own entries")
    out = run_folder(cfg, run.algo)
    state = load_checkpoint(cfg.resume, cfg) if cfg.resume else None
    if state is not None:
        for name, obj in run.stateful.items():
            obj.load_state_dict(state[name])
        load_buffer_state_dict(run.buffer, state["buffer"])
        run.collector.load_state_dict(state["collector"])
    counters = run_counters(cfg, state)
    total_frames: int = cfg.total_frames  # type: ignore[attr-defined]
    logger = RunLogger(out, total_frames, counters.frames, cfg.target_return)
    clock = Stopwatch(counters.wall)

    def snapshot() -> dict[str, Any]:
        return {
            **{name: obj.state_dict() for name, obj in run.stateful.items()},
            "buffer": buffer_state_dict(run.buffer),
            "collector": run.collector.state_dict(),
            **counters_state(
                cfg,
                frames=counters.frames,
                wall=clock.elapsed(),
                eval_return=counters.eval_return,
                next_eval=counters.next_eval,
                next_ckpt=counters.next_ckpt,
            ),
        }

    keeper = RunKeeper(out, cfg, total_frames, state)
    try:
        for batch in run.collector:
            counters.frames += batch.numel()
            run.buffer.extend(batch.reshape(-1).select(*STORED_KEYS))
            if run.on_batch is not None:
                run.on_batch(batch)
            logger.log_episodes(counters.frames, batch)
            if counters.frames >= cfg.init_random_frames and run.num_updates > 0:  # type: ignore[attr-defined]
                for _ in range(run.num_updates):
                    scalars = run.update(run.buffer.sample())
                logger.log(counters.frames, **{k: _item(v) for k, v in scalars.items()})
            if counters.frames >= counters.next_eval:
                counters.next_eval += cfg.eval_every
                counters.eval_return = evaluate(
                    run.eval_env, run.eval_policy, cfg.eval_episodes, seed=cfg.seed + 10_000
                )
                logger.log(counters.frames, **{"eval/return": counters.eval_return})
                keeper.evaluated(counters.frames, counters.eval_return, snapshot)
            stop = counters.frames >= total_frames or counters.eval_return >= cfg.target_return
            if counters.frames >= counters.next_ckpt or stop:
                while counters.next_ckpt <= counters.frames:
                    counters.next_ckpt += cfg.checkpoint_every
                keeper.save(snapshot())
            logger.advance(batch.numel())
            if stop:
                break
    except KeyboardInterrupt:  # Ctrl-C: the final checkpoint below, then exit 130
        keeper.interrupted = True
    return finish_run(
        run.collector,
        logger,
        clock,
        out,
        algo=run.algo,
        env=cfg.env,  # type: ignore[attr-defined]
        frames=counters.frames,
        eval_return=counters.eval_return,
        keeper=keeper,
        snapshot=snapshot,
    )
