"""``BurnInTransform``: refreshes recurrent states of sampled sequences by burning in a prefix."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import Transform


def _check_module(module: Any) -> None:
    if not (callable(module) and hasattr(module, "in_keys") and hasattr(module, "out_keys")):
        raise ValueError(
            "BurnInTransform: every module must be a TensorDict module (callable on a "
            f"TensorDict, with in_keys and out_keys); got {type(module).__name__}."
        )


class BurnInTransform(Transform):
    """Runs recurrent modules over the first ``burn_in`` steps of ``[B, T]`` sequences.

    A replay-buffer transform (R2D2's burn-in, Kapturowski et al. 2019): the stored
    recurrent states of old samples are stale, so the first ``burn_in`` steps are fed
    (without gradients) through ``modules``, and the sequence that is returned
    (steps ``burn_in ..``) starts with the states the modules wrote under ``"next"``
    at the last burnt-in step. Modules are duck-typed: any callable on a
    TensorDict with ``in_keys`` / ``out_keys`` (e.g. an LSTM/GRU module reading
    sequences with ``is_init`` marks), so this package needs no ``rl_modules``.

    Args:
        modules: one module or a sequence, applied in order to the burn-in prefix.
        burn_in: the number of steps to burn in (0: identity).
        out_keys: the state entries to refresh; defaults to the modules' ``out_keys``
            under ``"next"`` (``("next", "hidden")`` gives ``"hidden"``).

    Raises:
        ValueError: a module is not a TensorDict module.
        RuntimeError: used inside an env (it only runs on sampled sequences).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> class CumSum(torch.nn.Module):
        ...     def forward(self, obs, h):  # h_{t+1} = h_t + obs_t from the first stored h
        ...         return h[:, :1] + obs.cumsum(1)
        >>> m = TensorDictModule(CumSum(), ["obs", "h"], [("next", "h")])
        >>> data = TensorDict(obs=torch.ones(1, 5, 1), h=torch.zeros(1, 5, 1), batch_size=[1, 5])
        >>> out = BurnInTransform(m, burn_in=2)(data)
        >>> out.batch_size, out["h"][0, 0].item()
        (torch.Size([1, 3]), 2.0)
    """

    def __init__(
        self, modules: Any, burn_in: int, out_keys: Sequence[NestedKey] | None = None
    ) -> None:
        if not isinstance(modules, Sequence):
            modules = [modules]
        for module in modules:
            _check_module(module)
        in_keys: list[NestedKey] = []
        for module in modules:
            in_keys += [k for k in module.in_keys if k not in in_keys]
        if out_keys is None:
            outs: list[NestedKey] = []
            for module in modules:
                for key in module.out_keys:
                    if isinstance(key, tuple) and key[0] == "next":
                        inner = key[1] if len(key) == 2 else key[1:]
                        if inner not in outs:
                            outs.append(inner)
        else:
            outs = []
            for key in out_keys:
                if isinstance(key, tuple) and key[0] == "next":
                    warnings.warn(
                        f"BurnInTransform: out_key {key!r} does not need 'next': the states are "
                        "always read from the next step of the burnt-in data.",
                        UserWarning,
                        stacklevel=2,
                    )
                    key = key[1] if len(key) == 2 else key[1:]
                outs.append(key)
        super().__init__()  # in_keys and out_keys are not paired here: set them after
        self.in_keys, self.out_keys = in_keys, outs
        self.modules = list(modules)
        self.burn_in = int(burn_in)

    def transform_specs(self, specs: Any) -> Any:
        return specs  # a replay-buffer transform: an env's specs are not its business

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError("BurnInTransform can only be appended to a replay buffer.")

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError("BurnInTransform can only be appended to a replay buffer.")

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Burns in the first ``burn_in`` steps of ``[B, T, ...]`` data; returns steps ``burn_in ..``."""
        if self.burn_in == 0:
            return tensordict
        if tensordict.ndim < 2 or tensordict.shape[1] <= self.burn_in:
            raise ValueError(
                f"BurnInTransform: expected data of batch size [B, T, ...] with T > burn_in="
                f"{self.burn_in}, got {tuple(tensordict.batch_size)}."
            )
        device = tensordict.device
        prefix = tensordict[:, : self.burn_in].clone()
        out = tensordict[:, self.burn_in :].clone()
        with torch.no_grad():
            for module in self.modules:
                params = list(module.parameters()) if hasattr(module, "parameters") else []
                if params:
                    prefix = prefix.to(params[0].device)
                prefix = module(prefix)
        last = prefix.get("next")[:, -1]
        for key in self.out_keys:
            state = last.get(key)
            if device is not None:
                state = state.to(device)
            current = out.get(key, None)
            if current is None:
                current = torch.zeros(
                    *out.batch_size[:2], *state.shape[1:], dtype=state.dtype, device=state.device
                )
                out.set(key, current)
            current[:, 0] = state
        return out
