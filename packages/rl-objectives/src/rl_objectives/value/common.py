"""The base of the estimator modules: key routing and critic calls around the pure functions."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import skip_existing
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._checks import ESTIMATOR_BOUNDS, check_hyperparameter
from rl_objectives._keys import check_finite, get_entry, replace_keys

__all__ = ["ValueEstimatorBase", "ValueEstimatorKeys", "held_out"]


def held_out(
    module: nn.Module, params: TensorDictBase | None = None
) -> contextlib.AbstractContextManager:
    """Run ``module`` (with ``params`` swapped in, if given) on detached parameters when
    gradients are on: a differentiable estimator passes gradients to its inputs, never to the
    critic's or actor's parameters (TorchRL's ``hold_out_net``). Under ``no_grad`` only the swap.

    Examples:
        >>> net = torch.nn.Linear(2, 1)
        >>> x = torch.randn(3, 2, requires_grad=True)
        >>> with held_out(net):
        ...     y = net(x).sum()
        >>> y.backward()
        >>> net.weight.grad is None, x.grad is not None
        (True, True)
    """
    if torch.is_grad_enabled():
        params = (params if params is not None else TensorDict.from_module(module)).detach()
    if params is None:
        return contextlib.nullcontext()
    return params.to_module(module, preserve_module_state=False)


def standardize_all(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Zero mean, unit std over all of ``x`` (std floored at ``eps``).

    Examples:
        >>> standardize_all(torch.tensor([1.0, 3.0]), 1e-4)
        tensor([-0.7071,  0.7071])
    """
    return (x - x.mean()) / x.std().clamp_min(eps)


def _next(key: NestedKey) -> tuple[str, ...]:
    return ("next", *key) if isinstance(key, tuple) else ("next", key)


@dataclass(frozen=True)
class ValueEstimatorKeys:
    """The keys an estimator reads and writes (``reward``, ``done``, ``terminated`` under ``"next"``).

    Attributes:
        advantage: written advantage. Defaults to ``"advantage"``.
        value_target: written return target. Defaults to ``"value_target"``.
        value: the critic's output, read at the root and under ``"next"``. Defaults to ``"state_value"``.
        reward: read as ``("next", reward)``. Defaults to ``"reward"``.
        done: read as ``("next", done)``. Defaults to ``"done"``.
        terminated: read as ``("next", terminated)`` (``done`` if absent). Defaults to ``"terminated"``.
        sample_log_prob: behaviour log-probability (V-trace). Defaults to ``"action_log_prob"``.
        action: the action (V-trace). Defaults to ``"action"``.
    """

    advantage: NestedKey = "advantage"
    value_target: NestedKey = "value_target"
    value: NestedKey = "state_value"
    reward: NestedKey = "reward"
    done: NestedKey = "done"
    terminated: NestedKey = "terminated"
    sample_log_prob: NestedKey = "action_log_prob"
    action: NestedKey = "action"


class ValueEstimatorBase(nn.Module):
    """Reads rewards, flags and values from a TensorDict; writes ``advantage`` and ``value_target``.

    Subclasses implement :meth:`_estimate` with a pure function of
    :mod:`rl_objectives.value.functional`.

    Args:
        gamma: discount factor, in ``[0, 1]`` (a tensor: every entry); checked when set.
        value_network: a TensorDict module writing ``tensor_keys.value``; ``None`` to
            read ``value`` and ``("next", value)`` from the data.
        differentiable: keep the graph through the inputs (off by default: targets are
            constants); the critic's parameters never get gradients from the estimator.
        shifted: evaluate the critic once on the observations plus the next observations
            of the ``done`` and last steps only, instead of on all next observations.
        time_dim: the time dimension of the input TensorDict (its last batch dim by default).
        debug: raise on non-finite rewards or values (off: NaN or inf inputs propagate into
            the advantages, unchecked, since checking every call would sync the device).
        skip_existing: with ``True``, values already in the input (``value`` and
            ``("next", value)``) are used instead of calling the critic; ``None`` follows
            :func:`tensordict.nn.skip_existing`.
        value_chunk_size: evaluate the critic on chunks of this many entries (memory bound);
            the results are those of one call.
        num_chunks: evaluate the critic in this many chunks (``num_chunk``: TorchRL's alias);
            exclusive with ``value_chunk_size``.
        value_chunk_dim: the dimension chunks run along (the critic's input is flattened to one
            batch dim when root and next observations go in one call: chunks then run along it).
        deactivate_vmap: TorchRL's switch between vmap and a loop; the critic runs batched
            here, so the values are the same either way.
    """

    one_step: ClassVar[bool] = False  # a one-step target: works on a single transition

    default_keys = ValueEstimatorKeys
    _AcceptedKeys = ValueEstimatorKeys  # TorchRL's name for the keys dataclass

    def __init__(
        self,
        *,
        gamma: float | torch.Tensor = 0.99,
        value_network: nn.Module | None = None,
        differentiable: bool = False,
        shifted: bool = False,
        time_dim: int | None = None,
        debug: bool = False,
        skip_existing: bool | None = None,
        value_chunk_size: int | None = None,
        num_chunks: int | None = None,
        num_chunk: int | None = None,
        value_chunk_dim: int = 0,
        deactivate_vmap: bool = False,
    ) -> None:
        super().__init__()
        if num_chunk is not None:
            if num_chunks is not None and num_chunks != num_chunk:
                raise ValueError(
                    f"num_chunk={num_chunk} and num_chunks={num_chunks} differ; give one of them."
                )
            num_chunks = num_chunk
        if value_chunk_size is not None and num_chunks is not None:
            raise ValueError("value_chunk_size and num_chunks are mutually exclusive; give one.")
        for name, n in (("value_chunk_size", value_chunk_size), ("num_chunks", num_chunks)):
            if n is not None and n < 1:
                raise ValueError(f"{name} must be a positive integer, got {n}.")
        self.skip_existing = skip_existing
        self.value_chunk_size = value_chunk_size
        self.num_chunks = num_chunks
        self.value_chunk_dim = value_chunk_dim
        self.deactivate_vmap = deactivate_vmap
        self.gamma = gamma
        self.value_network = value_network
        self.differentiable = differentiable
        self.shifted = shifted
        self.time_dim = time_dim
        self.debug = debug
        self._tensor_keys = self.default_keys()

    def __setattr__(self, name: str, value: Any) -> None:
        # gamma, lmbda, ... are range-checked when set (construction or later), never per call
        if name in ESTIMATOR_BOUNDS:
            check_hyperparameter(type(self).__name__, name, value, ESTIMATOR_BOUNDS[name])
        super().__setattr__(name, value)

    @classmethod
    def for_loss(cls, loss: nn.Module, *, value_network: nn.Module | None, **kwargs: Any):
        """Build the estimator a loss asks for (override when more than the critic is needed)."""
        return cls(value_network=value_network, **kwargs)

    @property
    def tensor_keys(self) -> ValueEstimatorKeys:
        """The keys in use (see :class:`ValueEstimatorKeys`)."""
        return self._tensor_keys

    def set_keys(self, **kwargs: NestedKey) -> ValueEstimatorBase:
        """Change the keys read and written; unknown names raise a ``ValueError``.

        Examples:
            >>> from rl_objectives.value import TD0Estimator
            >>> TD0Estimator(gamma=0.9).set_keys(value="q").tensor_keys.value
            'q'
        """
        self._tensor_keys = replace_keys(self._tensor_keys, type(self).__name__, kwargs)
        return self

    # -- reading ---------------------------------------------------------------------

    def _get(self, td: TensorDictBase, name: str, *, under_next: bool = False) -> torch.Tensor:
        key = getattr(self.tensor_keys, name)
        key = _next(key) if under_next else key
        return get_entry(td, key, owner=type(self).__name__, key_name=name, debug=self.debug)

    def _time_dim(self, td: TensorDictBase) -> int:
        if td.ndim == 0:
            raise ValueError(
                f"{type(self).__name__} needs a TensorDict with a time dimension; got batch_size=[]. "
                "Use batch_size [*B, T] (or [T])."
            )
        dim = td.ndim - 1 if self.time_dim is None else self.time_dim
        if not -td.ndim <= dim < td.ndim:
            raise ValueError(
                f"time_dim={self.time_dim} is out of range for batch_size={tuple(td.batch_size)}."
            )
        return dim % td.ndim

    def _flags(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        reward = self._get(td, "reward", under_next=True)
        done = self._get(td, "done", under_next=True)
        terminated = td.get(_next(self.tensor_keys.terminated), None)
        if terminated is None:
            terminated = done
        if done.shape != reward.shape and done.shape == reward.shape[:-1]:
            done, terminated = done.unsqueeze(-1), terminated.unsqueeze(-1)
        return reward, done, terminated

    # -- critic calls ----------------------------------------------------------------

    def _call(self, td: TensorDictBase, params: TensorDictBase | None) -> torch.Tensor:
        net = self.value_network
        td_in = td.select(*net.in_keys, strict=False)
        key = self.tensor_keys.value
        with held_out(net, params):
            if self.value_chunk_size is None and self.num_chunks is None:
                out = net(td_in)
                return get_entry(out, key, owner=type(self).__name__, key_name="value")
            dim = self.value_chunk_dim if self.value_chunk_dim < td_in.ndim else 0
            size = self.value_chunk_size or -(-td_in.shape[dim] // self.num_chunks)
            outs = [
                get_entry(net(chunk), key, owner=type(self).__name__, key_name="value")
                for chunk in td_in.split(size, dim)
            ]
        return torch.cat(outs, dim)

    def _next_value(
        self,
        td: TensorDictBase,
        target_params: TensorDictBase | None,
        params: TensorDictBase | None,
    ) -> torch.Tensor:
        if self.value_network is None or self._use_existing(td, "next"):
            return self._get(td, "value", under_next=True)
        return self._call(td.get("next"), target_params if target_params is not None else params)

    def _use_existing(self, td: TensorDictBase, *where: str) -> bool:
        """``skip_existing``: the values at ``where`` (the root, ``"next"``) are in ``td``."""
        skip = self.skip_existing
        if skip is None:
            skip = bool(skip_existing())
        if not skip:
            return False
        return all(
            td.get(_next(self.tensor_keys.value) if w == "next" else self.tensor_keys.value, None)
            is not None
            for w in where
        )

    def _values(
        self,
        td: TensorDictBase,
        params: TensorDictBase | None,
        target_params: TensorDictBase | None,
        done: torch.Tensor,
        time_dim: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(V(s), V(s'))`` from the data or from the critic, in one call when possible."""
        if self.value_network is None or self._use_existing(td, "root", "next"):
            return self._get(td, "value"), self._get(td, "value", under_next=True)
        if target_params is not None:
            return self._call(td, params), self._call(td.get("next"), target_params)
        in_keys = self.value_network.in_keys
        root = td.select(*in_keys, strict=False)
        nxt = td.get("next").select(*in_keys, strict=False)
        if not self.shifted:
            both = self._call(torch.cat([root.reshape(-1), nxt.reshape(-1)], 0), params)
            n = root.numel()
            shape = (*td.batch_size, *both.shape[1:])
            return both[:n].reshape(shape), both[n:].reshape(shape)
        # shifted: V(s[t+1]) is V(s'[t]) except after a done step or at the last step,
        # where the next observation is not the following root observation
        steps = td.shape[time_dim]
        last = torch.arange(steps, device=done.device) == steps - 1
        last = last.view([steps if d == time_dim else 1 for d in range(td.ndim)])
        mask = done.reshape(td.batch_size) | last
        extra = nxt[mask]
        both = self._call(torch.cat([root.reshape(-1), extra], 0), params)
        n = root.numel()
        value = both[:n].reshape(*td.batch_size, *both.shape[1:])
        next_value = value.roll(-1, dims=time_dim)
        full_mask = mask.reshape(*mask.shape, *([1] * (value.ndim - mask.ndim))).expand_as(value)
        next_value = next_value.masked_scatter(full_mask, both[n:])
        return value, next_value

    def _grad_context(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext() if self.differentiable else torch.no_grad()

    def _check_values(self, **values: torch.Tensor) -> None:
        if self.debug:
            for key, value in values.items():
                check_finite(value, key, owner=type(self).__name__)

    # -- API ------------------------------------------------------------------------

    def _estimate(
        self,
        td: TensorDictBase,
        value: torch.Tensor,
        next_value: torch.Tensor,
        reward: torch.Tensor,
        done: torch.Tensor,
        terminated: torch.Tensor,
        time_dim: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(advantage, value_target)``."""
        raise NotImplementedError

    def forward(
        self,
        tensordict: TensorDictBase,
        *,
        params: TensorDictBase | None = None,
        target_params: TensorDictBase | None = None,
    ) -> TensorDictBase:
        """Write ``advantage`` and ``value_target`` (and the values used) into ``tensordict``.

        Args:
            tensordict: ``[*B, T]`` data with ``("next", reward/done/terminated)`` and
                either the critic's inputs or ``value`` and ``("next", value)``.
            params: parameters the critic runs with (e.g. detached ones); its own by default.
            target_params: parameters for ``V(s')`` (e.g. target ones); ``params`` by default.

        Returns:
            ``tensordict``, updated in place.
        """
        time_dim = self._time_dim(tensordict)
        with self._grad_context():
            reward, done, terminated = self._flags(tensordict)
            value, next_value = self._values(tensordict, params, target_params, done, time_dim)
            self._check_values(state_value=value, next_state_value=next_value)
            advantage, target = self._estimate(
                tensordict, value, next_value, reward, done, terminated, time_dim
            )
        keys = self.tensor_keys
        if self.value_network is not None:
            tensordict.set(keys.value, value)
            tensordict.set(_next(keys.value), next_value)
        tensordict.set(keys.advantage, advantage)
        tensordict.set(keys.value_target, target)
        return tensordict

    def value_estimate(
        self,
        tensordict: TensorDictBase,
        *,
        params: TensorDictBase | None = None,
        target_params: TensorDictBase | None = None,
        next_value: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The return target only (what off-policy losses regress on).

        Args:
            tensordict: as in :meth:`forward`.
            params: parameters the critic runs with.
            target_params: parameters for ``V(s')``.
            next_value: ``V(s')`` computed by the caller; skips the critic call for it.

        Returns:
            the target, shaped like the reward.
        """
        if tensordict.ndim == 0 and self.one_step:
            # a single transition: a one-step target needs no time dim (TorchRL accepts it)
            nv = None if next_value is None else next_value.unsqueeze(0)
            return self.value_estimate(
                tensordict.unsqueeze(0), params=params, target_params=target_params, next_value=nv
            ).squeeze(0)
        time_dim = self._time_dim(tensordict)
        with self._grad_context():
            reward, done, terminated = self._flags(tensordict)
            if next_value is None:
                _, target = self._estimate_from(tensordict, params, target_params, time_dim)
                return target
            self._check_values(next_state_value=next_value)
            return self._target(tensordict, next_value, reward, done, terminated, time_dim)

    def _target(
        self,
        td: TensorDictBase,
        next_value: torch.Tensor,
        reward: torch.Tensor,
        done: torch.Tensor,
        terminated: torch.Tensor,
        time_dim: int,
    ) -> torch.Tensor:
        """The return target from a given ``V(s')`` (overridden where ``V(s)`` is not needed)."""
        value = (
            self._get(td, "value") if self._needs_state_value() else torch.zeros_like(next_value)
        )
        return self._estimate(td, value, next_value, reward, done, terminated, time_dim)[1]

    def _needs_state_value(self) -> bool:
        return True

    def _estimate_from(
        self,
        td: TensorDictBase,
        params: TensorDictBase | None,
        target_params: TensorDictBase | None,
        time_dim: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        reward, done, terminated = self._flags(td)
        if self._needs_state_value():
            value, next_value = self._values(td, params, target_params, done, time_dim)
        else:
            next_value = self._next_value(td, target_params, params)
            value = torch.zeros_like(next_value)
        self._check_values(next_state_value=next_value)
        return self._estimate(td, value, next_value, reward, done, terminated, time_dim)
