"""``set_truncated``: mark the last step of each batch as a truncated end of trajectory."""

from __future__ import annotations

from typing import Any

from tensordict import TensorDictBase

from rl_collectors._env_step import DONE_KEY, TRUNCATED_KEY, as_tuple


def truncated_keys_of(env: Any) -> tuple[tuple[str, ...], ...]:
    """The env's ``"truncated"`` done keys (root and nested), as tuples.

    Raises:
        ValueError: the env declares no truncated entry.
    """
    keys = tuple(as_tuple(k) for k in getattr(env, "done_keys", None) or ())
    truncated = tuple(k for k in keys if k[-1] == TRUNCATED_KEY)
    if not truncated:
        raise ValueError(
            f"set_truncated=True needs a 'truncated' entry among the env's done keys, but "
            f"{type(env).__name__} declares {[k if len(k) > 1 else k[0] for k in keys]}. "
            "Add one with env.add_truncated_keys() (rl_envs / TorchRL envs) before building "
            "the collector, or pass set_truncated=False."
        )
    return truncated


def truncate_step(
    batch: TensorDictBase, truncated_keys: tuple[tuple[str, ...], ...], time_dim: int, step: int
) -> None:
    """Set ``("next", *key)`` and its sibling ``"done"`` to ``True`` at ``step`` of ``batch``
    (in place), for each truncated key: the trajectory is cut there, not terminated.

    Args:
        batch: a batch of shape ``[*B, T]`` holding a ``"next"`` sub-TensorDict.
        truncated_keys: keys of ``"next"`` ending in ``"truncated"``.
        time_dim: the time dimension of ``batch`` (``len(B)``).
        step: the time index to mark.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> batch = TensorDict({"next": {"done": torch.zeros(3, 1, dtype=torch.bool),
        ...     "truncated": torch.zeros(3, 1, dtype=torch.bool)}}, [3])
        >>> truncate_step(batch, (("truncated",),), time_dim=0, step=2)
        >>> batch["next", "done"].flatten().tolist()
        [False, False, True]
    """
    for key in truncated_keys:
        for leaf in (key, (*key[:-1], DONE_KEY)):
            flag = batch.get(("next", *leaf), None)
            if flag is not None:
                flag.select(time_dim, step).fill_(True)
