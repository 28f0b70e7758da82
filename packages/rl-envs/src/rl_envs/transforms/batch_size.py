"""``BatchSizeTransform``: gives an env another batch size (reshape, or expand a stateless env)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import is_composite
from rl_envs.transforms.transform import EnvSpecs, Transform


def _reshape_spec(spec: Any, old: torch.Size, new: torch.Size) -> Any:
    """``spec`` (leading dims ``old``) with its leading dims laid out as ``new``."""
    if is_composite(spec):
        return spec._map(lambda child: _reshape_spec(child, old, new), new)
    return spec.reshape(*new, *spec.shape[len(old) :])


class BatchSizeTransform(Transform):
    """Changes the batch size of an env.

    Two uses, one of ``batch_size`` / ``reshape_fn``:

    - ``batch_size``: a batch-unlocked (e.g. stateless) env gets a fixed batch size;
      each reset output is expanded to it, so that collectors and rollouts see a
      regular batched env. Steps pass through (the env follows its input's batch).
    - ``reshape_fn``: a reshape of the env's batch (``reshape``, ``flatten``,
      ``unflatten``, ``squeeze``, ``unsqueeze``), applied to every output and spec;
      inputs (actions) are reshaped back to the inner batch before the env reads them.

    Outside an env (a replay buffer) ``reshape_fn`` is applied to each sample.

    Args:
        batch_size: the new batch size (keyword only).
        reshape_fn: a function of a TensorDict (and of a tensor: it is run on a
            ``meta`` tensor to find the new batch size).
        reset_func: ``reset_func(tensordict, tensordict_reset)`` builds the reset output
            (before the expand / reshape); ``tensordict`` is the reset's input.
        env_kwarg: ``reset_func`` also receives ``env=`` (the enclosing env).

    Raises:
        ValueError: neither or both of ``batch_size`` / ``reshape_fn``.

    Example:
        >>> from rl_envs import PendulumEnv, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(), BatchSizeTransform(reshape_fn=lambda x: x.reshape(1, 1)))
        >>> env.batch_size, env.rollout(3).shape
        (torch.Size([1, 1]), torch.Size([1, 1, 3]))
    """

    def __init__(
        self,
        *,
        batch_size: Sequence[int] | torch.Size | None = None,
        reshape_fn: Callable[[Any], Any] | None = None,
        reset_func: Callable[..., TensorDictBase] | None = None,
        env_kwarg: bool = False,
    ) -> None:
        if (batch_size is None) == (reshape_fn is None):
            raise ValueError(
                "BatchSizeTransform: one and only one of batch_size OR reshape_fn must be provided."
            )
        super().__init__()
        self.batch_size = torch.Size(batch_size) if batch_size is not None else None
        self.reshape_fn = reshape_fn
        self.reset_func = reset_func
        self.env_kwarg = env_kwarg

    # ------------------------------------------------------------ batch size
    def transform_env_batch_size(self, batch_size: torch.Size) -> torch.Size:
        """The env's batch size once this transform applies."""
        if self.batch_size is not None:
            return self.batch_size
        return self.reshape_fn(torch.zeros(batch_size, device="meta")).shape

    def _inner_batch_size(self) -> torch.Size | None:
        """The batch size of the env beneath this transform, or ``None`` outside an env."""
        env, preceding = self._env_and_index()
        if env is None:
            return None
        batch_size = env.base_env.batch_size
        for t in preceding:
            batch_size = t.transform_env_batch_size(batch_size)
        return batch_size

    # ------------------------------------------------------------------ data
    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        if self.reset_func is not None:
            if self.env_kwarg:
                tensordict_reset = self.reset_func(
                    tensordict, tensordict_reset, env=self._env_and_index()[0]
                )
            else:
                tensordict_reset = self.reset_func(tensordict, tensordict_reset)
        if self.batch_size is not None:
            return tensordict_reset.expand(self.batch_size).clone()
        return self.reshape_fn(tensordict_reset)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self.reshape_fn is not None:
            return self.reshape_fn(next_tensordict)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict)

    def _to_inner(self, tensordict: TensorDictBase) -> TensorDictBase:
        inner = self._inner_batch_size() if self.reshape_fn is not None else None
        if inner is None or tensordict.batch_size == inner:
            return tensordict
        return tensordict.reshape(inner)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._to_inner(tensordict)

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        return None if tensordict is None else self._to_inner(tensordict)

    def _has_inverse(self) -> bool:
        return self.reshape_fn is not None

    # ----------------------------------------------------------------- specs
    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        for name in ("observation", "reward", "done", "action", "state"):
            spec = getattr(specs, name)
            if self.batch_size is not None:
                out = spec.expand(*self.batch_size)
            else:
                new = self.transform_env_batch_size(spec.shape)
                out = _reshape_spec(spec, spec.shape, new)
            setattr(specs, name, out)
        return specs

    def extra_repr(self) -> str:
        if self.batch_size is not None:
            return f"batch_size={tuple(self.batch_size)}"
        return f"reshape_fn={self.reshape_fn!r}"
