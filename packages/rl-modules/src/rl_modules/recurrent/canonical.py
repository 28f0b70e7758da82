"""Give the entries a recurrent module reads and writes a plain row-major layout, and no others.

A batch that went through indexing, transposes or stacking can hold views whose
strides are not row-major (even when ``is_contiguous()`` says True, through a
size-1 dim); sequence kernels that read strides want the plain layout. Copying
the whole batch to get it costs memory for entries (rewards, advantages) the
module never reads, so only the module's keys are re-laid.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey


def _row_major_strides(shape: torch.Size) -> tuple[int, ...]:
    strides, running = [], 1
    for size in reversed(shape):
        strides.append(running)
        running *= size
    return tuple(reversed(strides))


def _row_major(value: torch.Tensor) -> torch.Tensor:
    if tuple(value.stride()) == _row_major_strides(value.shape):
        return value
    return torch.empty(value.shape, dtype=value.dtype, device=value.device).copy_(value)


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def canonicalize_rnn_subset(
    data: TensorDictBase, modules: Iterable[Any], *, inplace: bool = False
) -> TensorDictBase:
    """``data`` with the entries of ``modules``' keys in row-major layout, the others untouched.

    The keys are each module's ``canonical_keys`` (an ``LSTMModule`` /
    ``GRUModule``: its ``in_keys`` and ``out_keys``); keys absent from ``data``
    are skipped. Entries already row-major are kept as they are (no copy).

    Args:
        data: the batch.
        modules: the recurrent modules (e.g. a recurrent actor and critic) fed from ``data``.
        inplace: write the re-laid entries into ``data`` and return it; otherwise a
            shallow copy is returned and ``data`` is unchanged.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_modules import LSTMModule
        >>> lstm = LSTMModule(input_size=3, hidden_size=4, in_key="obs", out_key="h")
        >>> obs = torch.zeros(5, 2, 3).transpose(0, 1)  # a [2, 5, 3] view, not row-major
        >>> td = TensorDict(obs=obs, reward=torch.zeros(5, 2, 1).transpose(0, 1), batch_size=[2, 5])
        >>> out = canonicalize_rnn_subset(td, [lstm])
        >>> out["obs"].is_contiguous(), out["reward"].is_contiguous()
        (True, False)
    """
    present = {_as_tuple(k) for k in data.keys(include_nested=True, leaves_only=True)}
    keys: dict[tuple[str, ...], None] = {}
    for module in modules:
        names = getattr(module, "canonical_keys", None)
        if names is None:
            names = [*module.in_keys, *module.out_keys]
        keys.update((_as_tuple(k), None) for k in names if _as_tuple(k) in present)
    out = data if inplace else data.copy()
    for key in keys:
        value = data.get(key)
        laid = _row_major(value)
        if laid is not value:
            out.set(key, laid)
    return out
