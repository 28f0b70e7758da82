"""``SerialEnv``: several envs stepped one after the other in this process."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensordict import TensorDictBase

from rl_envs.batched import _fast
from rl_envs.batched._layout import (
    Buffers,
    as_fn_list,
    as_kwargs_list,
    fill_skipped,
    make_buffers,
    read_meta,
    set_batched_specs,
    write_inputs,
)
from rl_envs.batched._unbuffered import (
    keep_rows,
    reset_items,
    skip_rows,
    stack_rows,
    step_items,
    wants_buffers,
)
from rl_envs.batched._view import RowView, make_view, refuse_writeback
from rl_envs.batched._worker import EnvGroup
from rl_envs.env_base import EnvBase
from rl_envs.rollout_backend import RolloutBackend

__all__ = ["SerialEnv"]


class SerialEnv(EnvBase):
    """``num_workers`` copies of an env stepped in sequence, as one env of batch ``[N]``.

    The batch is ``[num_workers, *sub_batch]``. Inputs and outputs go through
    preallocated buffers (see ``rl_envs.batched._layout``); ``step`` returns a
    fresh copy of the outputs. Partial resets (``"_reset"``) reset only the
    flagged sub-envs, so ``step_and_maybe_reset`` and ``rollout(...,
    break_when_any_done=False)`` keep every sub-env going with its own episodes.
    Sub-env ``i`` is seeded with ``seed + i``.

    Args:
        num_workers: number of sub-envs.
        create_env_fn: a callable returning an env, or one per sub-env.
        create_env_kwargs: keyword arguments for it (a dict, or one per sub-env).
        device: must be the sub-envs' device (kept for TorchRL parity).
        validate_actions: see :class:`~rl_envs.EnvBase`.
        use_buffers: pass data through preallocated buffers (``True``) or as
            TensorDicts, stacked lazily where the rows differ (``False``: for
            observations that change shape or non-tensor data; see
            ``rl_envs.batched._unbuffered``). Default: buffers unless a spec has a
            ``-1`` dim or is ``NonTensor`` (such specs never use buffers).
        share_individual_td: TorchRL's choice between one stacked buffer and one buffer
            per sub-env. Results are the same either way; here the buffers are always
            one TensorDict per exchange (rows are the sub-envs), so it is recorded only.
        consolidate: TorchRL's choice to pack TensorDicts into one buffer before sending them
            between processes; here data crosses through preallocated buffers (or pickled
            rows), so it is recorded only.
        mp_start_method: accepted for TorchRL parity (its batched envs share the
            signature); a SerialEnv starts no process, so it is unused.

    Example:
        >>> from rl_envs import PendulumEnv, SerialEnv
        >>> with SerialEnv(3, PendulumEnv) as env:
        ...     env.rollout(5).batch_size
        torch.Size([3, 5])
    """

    def __init__(
        self,
        num_workers: int,
        create_env_fn: Callable[..., Any] | Sequence[Callable[..., Any]],
        create_env_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        *,
        device: Any = None,
        validate_actions: bool = False,
        use_buffers: bool | None = None,
        share_individual_td: bool | None = None,
        consolidate: bool = True,
        mp_start_method: str | None = None,
    ) -> None:
        del mp_start_method  # no processes here
        fns = as_fn_list(create_env_fn, num_workers)
        kwargs = as_kwargs_list(create_env_kwargs, num_workers)
        envs = [fn(**kw) for fn, kw in zip(fns, kwargs, strict=True)]
        meta = read_meta(envs[0])
        if device is not None and str(device) != str(meta.device):
            raise ValueError(
                f"SerialEnv(device={device!r}) but the sub-envs live on {meta.device}: "
                "create the sub-envs on the device you want."
            )
        super().__init__(
            device=meta.device,
            batch_size=(num_workers, *meta.batch_size),
            validate_actions=validate_actions,
        )
        self.num_workers = num_workers
        self.create_env_fn = fns
        self.create_env_kwargs = kwargs
        if meta.device is None:  # sub-env outputs on several devices: no single device
            self._device = None
        set_batched_specs(self, meta, num_workers)
        # buffers only where the specs fit them (fixed shapes, tensors): else TensorDicts
        self.use_buffers = wants_buffers(meta) and use_buffers is not False
        self.share_individual_td = bool(share_individual_td)
        self.consolidate = bool(consolidate)  # TorchRL's IPC packing flag; recorded only
        self._exchange: Buffers | None = (
            make_buffers(self, shared=False) if self.use_buffers else None
        )
        self._group = EnvGroup(envs, self._exchange, 0)
        self._rows: list[TensorDictBase | None] = [None] * num_workers  # last reset rows
        self._closed = False

    @property
    def envs(self) -> list[EnvBase]:
        """The sub-envs."""
        return self._group.envs

    def update_kwargs(self, kwargs: dict[str, Any] | Sequence[dict[str, Any]]) -> None:
        """Rebuilds the sub-envs with updated keyword arguments (specs must not change)."""
        updates = as_kwargs_list(kwargs, self.num_workers, name="kwargs")
        for current, update in zip(self.create_env_kwargs, updates, strict=True):
            current.update(update)
        self._group.close()
        envs = [fn(**kw) for fn, kw in zip(self.create_env_fn, self.create_env_kwargs, strict=True)]
        self._group = EnvGroup(envs, self._exchange, 0)

    def __getitem__(self, item: Any) -> SerialEnv:
        """A live view on the sub-envs ``item`` selects (an int, a slice, an index array).

        The view is a ``SerialEnv`` of batch ``[len(rows), *sub_batch]``; its resets and steps
        are partial resets / steps of this env (see ``rl_envs.batched._view``).

        Raises:
            NotImplementedError: ``item`` is a boolean mask.
        """
        return make_view(self, item, _SerialView)

    def __setitem__(self, item: Any, value: Any) -> None:
        refuse_writeback("SerialEnv")

    def start(self) -> None:
        """Nothing to start (the sub-envs live in this process); TorchRL's batched-env API.

        Raises:
            RuntimeError: the env is closed.
        """
        self._check_open()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("SerialEnv is closed: create a new one.")

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        self._check_open()
        if self._exchange is None:
            outs = self._group.reset_unbuffered(reset_items(tensordict, self.num_workers))
            self._rows = keep_rows(outs, self._rows, tensordict)
            return stack_rows(outs, self._rows)
        mask = tensordict.get("_reset", None) if tensordict is not None else None
        reset_buf = self._exchange.inputs.get("_reset")
        if mask is None:
            reset_buf.fill_(True)
        else:
            reset_buf.copy_(mask.reshape(reset_buf.shape))
        self._group.reset()
        return self._exchange.reset.clone()

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_open()
        if self._exchange is None:
            items = step_items(tensordict, self.num_workers)
            outs = self._group.step_unbuffered(items)
            return stack_rows(outs, skip_rows(self, tensordict, items))
        write_inputs(self._exchange, tensordict, "SerialEnv")
        mask = tensordict.get("_step", None)
        if mask is None:
            self._group.step()
            return self._exchange.next.clone()
        self._exchange.step_mask.copy_(mask.reshape(self.batch_size))
        self._group.step_partial()
        return fill_skipped(self, self._exchange.next.clone(), tensordict, mask)

    def _set_seed(self, seed: int | None) -> None:
        self._check_open()
        self._group.seed(seed, static_seed=False)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seeds sub-env ``i`` with ``seed + i`` (``seed`` for all with ``static_seed``).

        Returns:
            The seed for the next env: ``seed + num_workers`` (``seed`` if static).
        """
        self._check_open()
        self._group.seed(seed, static_seed)
        if seed is None or static_seed:
            return seed
        return seed + self.num_workers

    def get_state(self) -> dict[str, Any]:
        """The exact state of every sub-env (each must implement ``get_state``)."""
        self._check_open()
        return {"envs": self._group.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`get_state` result, sub-env by sub-env."""
        self._check_open()
        states = state["envs"]
        if len(states) != len(self.envs):
            raise ValueError(
                f"SerialEnv.set_state: the state holds {len(states)} sub-envs, this env has "
                f"{len(self.envs)}; restore into a SerialEnv built like the one that saved it."
            )
        self._group.set_state(states)
        self._awaiting_reset = False  # the restored states are a place to step from

    def close(self, *, raise_if_closed: bool = False) -> None:
        """Closes the sub-envs; calling it again does nothing.

        Args:
            raise_if_closed: raise ``RuntimeError`` instead when it is already closed
                (TorchRL's keyword, whose default is ``True`` there).
        """
        if self._closed:
            if raise_if_closed:
                raise RuntimeError("SerialEnv: trying to close a closed environment.")
            return
        self._closed = self.is_closed = True
        self._group.close()

    def __enter__(self) -> SerialEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _backend_supports(env: EnvBase, root: TensorDictBase, policy: Any, mode: str) -> bool:
    return (
        type(env) is SerialEnv
        and env._exchange is not None
        and _fast.supports(env._exchange, root, policy, mode)
    )


def _backend_run(
    env: SerialEnv,
    root: TensorDictBase,
    max_steps: int,
    policy: Any,
    mode: str,
    actions: dict[Any, Any] | None,
) -> TensorDictBase:
    """One command per step to the sub-envs, one copy per key (see ``batched._fast``)."""
    assert actions is not None  # supports() asked for random actions
    env._check_open()
    return _fast.run(env, env._exchange, env._group.step_reset, root, actions, mode)


SerialEnv.rollout_backends = (RolloutBackend("batched", _backend_supports, _backend_run),)


class _SerialView(RowView, SerialEnv):
    """``SerialEnv[i]``: a view on some of the parent's sub-envs (see ``rl_envs.batched._view``)."""
