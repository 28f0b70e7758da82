"""``Timer``: seconds spent in the env's step, in the policy and between resets."""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import EnvSpecs, Transform


class Timer(Transform):
    """Measures wall-clock intervals around an env, as TorchRL's ``Timer``.

    ``"time_step"`` (under ``"next"``): seconds from the action reaching the env
    (``inv``) to the step's output. ``"time_policy"``: seconds from the previous
    output (step or reset) to the next action, i.e. the policy's time.
    ``"time_reset"``: at a reset, seconds since the previous reset. Entries that
    do not apply at a given point are 0. Values are float scalars expanded to
    the batch size.

    Args:
        out_keys: three keys for the step, policy and reset times (default
            ``[f"{time_key}_step", f"{time_key}_policy", f"{time_key}_reset"]``).
        time_key: the prefix of the default keys.

    Raises:
        TypeError: ``out_keys`` does not have three keys.

    Example:
        >>> from rl_envs import PendulumEnv, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(), Timer())
        >>> ro = env.rollout(3)
        >>> bool((ro["next", "time_step"] > 0).all()), ro["next", "time_reset"].sum().item()
        (True, 0.0)
    """

    def __init__(self, out_keys: Sequence[NestedKey] | None = None, time_key: str = "time") -> None:
        if out_keys is None:
            out_keys = [f"{time_key}_step", f"{time_key}_policy", f"{time_key}_reset"]
        elif len(out_keys) != 3:
            raise TypeError(f"Timer: expected three out_keys, got out_keys={out_keys}.")
        super().__init__([], [])
        self.out_keys = list(out_keys)
        self.time_key = time_key
        self.time_step_key, self.time_policy_key, self.time_reset_key = self.out_keys
        self.last_inv_time: float | None = None
        self.last_call_time: float | None = None
        self.last_reset_time: float | None = None

    @staticmethod
    def _set(td: TensorDictBase, key: NestedKey, seconds: float) -> None:
        td.set(key, torch.full(td.batch_size, seconds, device=td.device))

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        self._previous_reset = self.last_reset_time
        self.last_reset_time = self.last_inv_time = time.time()
        return tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        now = time.time()
        previous = getattr(self, "_previous_reset", None)
        self._set(
            tensordict_reset, self.time_reset_key, 0.0 if previous is None else now - previous
        )
        self._set(tensordict_reset, self.time_step_key, 0.0)
        self._set(tensordict_reset, self.time_policy_key, 0.0)
        self.last_call_time = now
        return tensordict_reset

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        now = time.time()
        if self.last_call_time is not None:
            self._set(tensordict, self.time_policy_key, now - self.last_call_time)
        self.last_inv_time = now
        return tensordict

    def _has_inverse(self) -> bool:
        return True

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        now = time.time()
        start = self.last_inv_time if self.last_inv_time is not None else now
        self._set(next_tensordict, self.time_step_key, now - start)
        self._set(next_tensordict, self.time_reset_key, 0.0)
        policy = tensordict.get(self.time_policy_key, None)
        if policy is not None:
            next_tensordict.set(self.time_policy_key, policy)
        else:
            self._set(next_tensordict, self.time_policy_key, 0.0)
        self.last_call_time = now
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Refused, as in TorchRL: a Timer measures an env's calls and has nothing to time
        in a TensorDict alone.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError(
            "Timer times an env's steps, resets and policy calls: append it to an env "
            "(TransformedEnv(env, Timer())) instead of calling it on a TensorDict."
        )

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        from rl_envs.specs import Unbounded

        obs = specs.observation
        for key in self.out_keys:
            obs[key] = Unbounded(shape=obs.shape, device=obs.device)
        return specs
