"""The base of the drop-in estimator modules: key routing and critic calls around the scans."""

from __future__ import annotations

import contextlib

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_kernels._backend import BACKENDS
from rl_kernels.estimators._keys import ValueEstimatorKeys, get_entry, next_key, replace_keys

__all__ = ["ValueEstimatorBase", "held_out"]


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


def standardize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Zero mean, unit std over all of ``x`` (std floored at ``eps``).

    Examples:
        >>> standardize(torch.tensor([1.0, 3.0]), 1e-4)
        tensor([-0.7071,  0.7071])
    """
    return (x - x.mean()) / x.std().clamp_min(eps)


class ValueEstimatorBase(nn.Module):
    """Reads rewards, flags and values from a ``[*B, T]`` TensorDict; writes ``advantage`` and ``value_target``.

    Same constructor arguments, keys and outputs as ``rl_objectives.value``'s
    estimators, plus ``backend``. Subclasses implement :meth:`_estimate` with a
    scan of :mod:`rl_kernels.scans`.

    Args:
        gamma: discount factor.
        value_network: a TensorDict module writing ``tensor_keys.value``; ``None`` to
            read ``value`` and ``("next", value)`` from the data.
        differentiable: keep the graph through the critic's inputs, so gradients reach the data
            (never the critic's parameters, as in TorchRL); off by default: targets are constants.
        shifted: evaluate the critic on the observations plus only the next observations
            of the ``done`` and last steps, instead of on every next observation.
        time_dim: the time dimension of the TensorDict (its last batch dim by default).
        debug: raise on non-finite rewards or values.
        backend: ``"auto"``, ``"triton"`` or ``"torch"`` (see :mod:`rl_kernels.scans`).
    """

    default_keys = ValueEstimatorKeys

    def __init__(
        self,
        *,
        gamma: float | torch.Tensor = 0.99,
        value_network: nn.Module | None = None,
        differentiable: bool = False,
        shifted: bool = False,
        time_dim: int | None = None,
        debug: bool = False,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
        self.gamma = gamma
        self.value_network = value_network
        self.differentiable = differentiable
        self.shifted = shifted
        self.time_dim = time_dim
        self.debug = debug
        self.backend = backend
        self._tensor_keys = self.default_keys()

    @property
    def tensor_keys(self) -> ValueEstimatorKeys:
        """The keys in use (see :class:`~rl_kernels.estimators.ValueEstimatorKeys`)."""
        return self._tensor_keys

    def set_keys(self, **kwargs: NestedKey) -> ValueEstimatorBase:
        """Change the keys read and written; unknown names raise a ``ValueError``.

        Examples:
            >>> from rl_kernels import GAE
            >>> GAE(gamma=0.9, lmbda=0.9).set_keys(value="v").tensor_keys.value
            'v'
        """
        self._tensor_keys = replace_keys(self._tensor_keys, type(self).__name__, kwargs)
        return self

    # -- reading -------------------------------------------------------------------------

    def _get(self, td: TensorDictBase, name: str, *, under_next: bool = False) -> torch.Tensor:
        key = getattr(self.tensor_keys, name)
        key = next_key(key) if under_next else key
        return get_entry(td, key, owner=type(self).__name__, key_name=name, debug=self.debug)

    def _time_dim(self, td: TensorDictBase) -> int:
        if td.ndim == 0:
            raise ValueError(
                f"{type(self).__name__} needs a TensorDict with a time dimension; got "
                "batch_size=[]. Use batch_size [*B, T] (or [T])."
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
        terminated = td.get(next_key(self.tensor_keys.terminated), None)
        if terminated is None:
            terminated = done
        if done.shape != reward.shape and done.shape == reward.shape[:-1]:
            done, terminated = done.unsqueeze(-1), terminated.unsqueeze(-1)
        return reward, done, terminated

    # -- critic calls --------------------------------------------------------------------

    def _call(self, td: TensorDictBase, params: TensorDictBase | None) -> torch.Tensor:
        net = self.value_network
        with held_out(net, params):
            out = net(td.select(*net.in_keys, strict=False))
        return get_entry(out, self.tensor_keys.value, owner=type(self).__name__, key_name="value")

    def _values(
        self,
        td: TensorDictBase,
        params: TensorDictBase | None,
        target_params: TensorDictBase | None,
        done: torch.Tensor,
        time_dim: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(V(s), V(s'))`` from the data or from the critic (one call when possible)."""
        if self.value_network is None:
            return self._get(td, "value"), self._get(td, "value", under_next=True)
        if target_params is not None:
            return self._call(td, params), self._call(td.get("next"), target_params)
        in_keys = self.value_network.in_keys
        root = td.select(*in_keys, strict=False)
        nxt = td.get("next").select(*in_keys, strict=False)
        n = root.numel()
        if not self.shifted:
            both = self._call(torch.cat([root.reshape(-1), nxt.reshape(-1)], 0), params)
            shape = (*td.batch_size, *both.shape[1:])
            return both[:n].reshape(shape), both[n:].reshape(shape)
        # V(s[t+1]) is V(s'[t]) except after a done step and at the last step
        steps = td.shape[time_dim]
        last = torch.arange(steps, device=done.device) == steps - 1
        last = last.view([steps if d == time_dim else 1 for d in range(td.ndim)])
        mask = done.reshape(td.batch_size) | last
        both = self._call(torch.cat([root.reshape(-1), nxt[mask]], 0), params)
        value = both[:n].reshape(*td.batch_size, *both.shape[1:])
        full = mask.reshape(*mask.shape, *([1] * (value.ndim - mask.ndim))).expand_as(value)
        next_value = value.roll(-1, dims=time_dim).masked_scatter(full, both[n:])
        return value, next_value

    def _grad_context(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext() if self.differentiable else torch.no_grad()

    # -- API ---------------------------------------------------------------------------

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
            advantage, target = self._estimate(
                tensordict, value, next_value, reward, done, terminated, time_dim
            )
        keys = self.tensor_keys
        if self.value_network is not None:
            tensordict.set(keys.value, value)
            tensordict.set(next_key(keys.value), next_value)
        tensordict.set(keys.advantage, advantage)
        tensordict.set(keys.value_target, target)
        return tensordict

    def value_estimate(
        self,
        tensordict: TensorDictBase,
        *,
        params: TensorDictBase | None = None,
        target_params: TensorDictBase | None = None,
    ) -> torch.Tensor:
        """The return target only, without writing into ``tensordict``.

        Args:
            tensordict: as in :meth:`forward`.
            params: parameters the critic runs with.
            target_params: parameters for ``V(s')``.
        """
        time_dim = self._time_dim(tensordict)
        with self._grad_context():
            reward, done, terminated = self._flags(tensordict)
            value, next_value = self._values(tensordict, params, target_params, done, time_dim)
            return self._estimate(
                tensordict, value, next_value, reward, done, terminated, time_dim
            )[1]
