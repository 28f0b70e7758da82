"""``env[i]`` of a SerialEnv / ParallelEnv: a live view on some of its sub-envs.

TorchRL's indexing: ``env[2]``, ``env[-1]``, ``env[1:3]``, ``env[np.array([0, 3])]`` or
``env[torch.tensor([1, 3])]`` give an env of the same class whose batch is the selected
rows of the parent's first dim. The view owns nothing: a reset or step of the view is a
partial reset / step of the parent (``"_reset"`` / ``"_step"`` masks), so the parent's
sub-envs (and their workers) move and the parent sees it. Closing the view closes only
the view; once the parent is closed, the view refuses to run. Boolean masks and
assigning a sub-env (``env[0] = other_env``) are refused, as in TorchRL.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_envs.env_base import EnvBase


def select_rows(item: Any, n: int, owner: str) -> torch.Tensor:
    """The rows (sub-envs) ``item`` selects among ``n``, as a 1-d long tensor.

    Raises:
        NotImplementedError: a boolean mask.
        IndexError: an index out of range, or an index of more than one dim.
    """
    if isinstance(item, (np.ndarray, torch.Tensor)) and item.dtype in (np.bool_, torch.bool):
        raise NotImplementedError(
            f"{owner}[mask]: Boolean masks are not supported to index a batched env; pass "
            "the indices instead (env[mask.nonzero()[0]] with numpy, "
            "env[mask.nonzero().squeeze(-1)] with torch)."
        )
    if isinstance(item, tuple):
        raise IndexError(f"{owner}[...]: index the sub-envs with one index, got {item!r}.")
    rows = torch.arange(n)[torch.as_tensor(item) if not isinstance(item, slice) else item]
    return rows.reshape(-1)


def refuse_writeback(owner: str) -> None:
    raise NotImplementedError(
        f"{owner}[i] = env: replacing a sub-env by another env's snapshot writeback is not "
        "supported; build the batched env from the sub-envs you want, or restore a state "
        "with env.set_state(...)."
    )


class RowView:
    """What the views of both batched classes share (mixed in before the class)."""

    _view_parent: Any
    _view_rows: torch.Tensor
    _view_closed: bool

    def _init_view(self, parent: Any, rows: torch.Tensor) -> None:
        EnvBase.__init__(
            self,  # type: ignore[arg-type]
            device=parent.device,
            batch_size=(len(rows), *parent.batch_size[1:]),
            validate_actions=parent.validate_actions,
        )
        self._view_parent = parent
        self._view_rows = rows
        self._view_closed = False
        self.num_workers = len(rows)
        k = len(rows)
        for name in ("observation", "action", "reward", "done", "state"):
            spec = getattr(parent, f"full_{name}_spec")
            setattr(self, f"full_{name}_spec", spec[0].expand(k, *spec.shape[1:]))

    def _check_view(self) -> None:
        if self._view_closed:
            raise RuntimeError(
                f"{type(self).__name__}: this closed indexed env cannot run; index the parent "
                "env again (env[i]) for a new view."
            )
        if self._view_parent.is_closed:
            raise RuntimeError(
                f"{type(self).__name__}: the parent environment has been closed; an indexed "
                "env runs its parent's sub-envs and cannot outlive it."
            )

    def _full_mask(self, rows_mask: torch.Tensor | None, trailing: int) -> torch.Tensor:
        parent = self._view_parent
        shape = (*parent.batch_size, *([1] * trailing))
        mask = torch.zeros(shape, dtype=torch.bool, device=parent.device)
        if rows_mask is None:
            mask[self._view_rows] = True
        else:
            mask[self._view_rows] = rows_mask.reshape(mask[self._view_rows].shape).to(mask.device)
        return mask

    def _scatter(self, full: TensorDictBase, tensordict: TensorDictBase) -> None:
        for key in full.keys(True, True):
            value = tensordict.get(key, None)
            if value is not None:
                full.get(key)[self._view_rows] = value.to(full.device)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        self._check_view()
        parent = self._view_parent
        full = parent.full_state_spec.zero()
        rows_mask = None
        if tensordict is not None:
            self._scatter(full, tensordict)
            rows_mask = tensordict.get("_reset", None)
        full.set("_reset", self._full_mask(rows_mask, 1))
        return parent._reset(full, **kwargs)[self._view_rows]

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_view()
        parent = self._view_parent
        full = parent.full_action_spec.zero()
        full.update(parent.full_state_spec.zero())
        self._scatter(full, tensordict)
        full.set("_step", self._full_mask(tensordict.get("_step", None), 0))
        return parent._step(full)[self._view_rows]

    def _set_seed(self, seed: int | None) -> None:
        self.set_seed(seed)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        raise NotImplementedError(
            f"{type(self).__name__}: seed the parent batched env (an indexed env is a view "
            "on its sub-envs, seeded with them)."
        )

    def start(self) -> None:
        self._check_view()
        self._view_parent.start()

    def close(self, *, raise_if_closed: bool = False) -> None:
        if self._view_closed and raise_if_closed:
            raise RuntimeError(f"{type(self).__name__}: trying to close a closed environment.")
        self._view_closed = self.is_closed = True


def make_view(parent: Any, item: Any, view_cls: type) -> Any:
    """``view_cls`` (a ``RowView`` subclass of ``type(parent)``) over the rows ``item`` selects."""
    rows = select_rows(item, parent.batch_size[0], type(parent).__name__)
    view = EnvBase.__new__(view_cls)  # EnvBase.__new__ sets what __init__ relies on
    view._init_view(parent, rows)
    return view
