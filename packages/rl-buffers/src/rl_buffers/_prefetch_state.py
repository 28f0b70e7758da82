"""Prefetched batches in checkpoints: a restored buffer returns the batches the original had queued."""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from typing import Any

import torch
import torch.utils._pytree as pytree
from tensordict import is_tensor_collection


def _copy(value: Any) -> Any:
    """A copy sharing no memory; tensors that required grad stay leaves that require grad."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if is_tensor_collection(value):
        return value.apply(_copy)
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_copy(v) for v in value)
    return pytree.tree_map(lambda x: x, value)


def snapshot(futures: deque[Future], capacity: int) -> dict[str, Any]:
    """The queued ``(data, info, ran_out)`` batches (waits for those still being sampled), copied."""
    return {"capacity": capacity, "queue": [_copy(future.result()) for future in list(futures)]}


def settle(futures: deque[Future]) -> None:
    """Waits for the batches still being sampled (they would move the generator after a load)."""
    for future in list(futures):
        future.exception()


def check(state: dict[str, Any] | None, capacity: int) -> None:
    """Raises before anything is loaded if the saved queue does not fit this buffer."""
    if state is not None and state["queue"] and state["capacity"] != capacity:
        raise RuntimeError(
            f"Cannot load a prefetch queue with capacity {state['capacity']} into a buffer built "
            f"with prefetch={capacity}: build it with prefetch={state['capacity']}."
        )


def restore(state: dict[str, Any] | None) -> deque[Future]:
    """Completed futures holding copies of the saved batches (empty for old checkpoints)."""
    queue: deque[Future] = deque()
    for batch in (state or {}).get("queue", []):
        future: Future = Future()
        future.set_result(_copy(batch))
        queue.append(future)
    return queue
