"""Schedules for a sampler's parameters (e.g. a prioritized sampler's ``beta``), TorchRL's API.

Each ``step()`` computes the next value, clips it to ``[min_value, max_value]`` and sets
it on the sampler. The ``beta`` annealing of prioritized replay (Schaul et al., 2016,
"Prioritized Experience Replay", section 3.4) is ``LinearScheduler(rb, "beta", 1.0, n)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rl_buffers.replay_buffer import ReplayBuffer
from rl_buffers.samplers.base import Sampler

Number = int | float | torch.Tensor


class ParameterScheduler:
    """Base class: adjusts attribute ``param_name`` of a buffer's sampler at each :meth:`step`.

    Args:
        obj: a :class:`ReplayBuffer` (its sampler is adjusted) or a :class:`Sampler`.
        param_name: the sampler attribute to adjust, e.g. ``"beta"``.
        min_value: lower bound of the value (``None``: none).
        max_value: upper bound of the value (``None``: none).

    Raises:
        TypeError: ``obj`` is neither a replay buffer nor a sampler.
        ValueError: the sampler has no attribute ``param_name``.
    """

    def __init__(
        self,
        obj: ReplayBuffer | Sampler,
        param_name: str,
        min_value: Number | None = None,
        max_value: Number | None = None,
    ) -> None:
        if not isinstance(obj, (ReplayBuffer, Sampler)):
            raise TypeError(
                f"{type(self).__name__} adjusts a sampler: pass a ReplayBuffer or a Sampler, "
                f"got {type(obj).__name__}."
            )
        self.sampler = obj.sampler if isinstance(obj, ReplayBuffer) else obj
        self.param_name = param_name
        if not hasattr(self.sampler, param_name):
            raise ValueError(
                f"{type(self.sampler).__name__} has no attribute {param_name!r} to schedule "
                "(a PrioritizedSampler has 'alpha' and 'beta')."
            )
        self._min_val = min_value
        self._max_val = max_value
        initial = getattr(self.sampler, param_name)
        self.initial_val = initial.clone() if isinstance(initial, torch.Tensor) else initial
        self._step_cnt = 0

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's state, the sampler excluded."""
        return {k: v for k, v in self.__dict__.items() if k != "sampler"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores a :meth:`state_dict`."""
        self.__dict__.update(state_dict)

    def _clip(self, value: Number) -> Number:
        if isinstance(value, torch.Tensor):
            return value.clamp(min=self._min_val, max=self._max_val)
        if self._min_val is not None:
            value = max(value, self._min_val)
        if self._max_val is not None:
            value = min(value, self._max_val)
        return value

    def step(self) -> None:
        """Advances one step and sets the new (clipped) value on the sampler."""
        self._step_cnt += 1
        setattr(self.sampler, self.param_name, self._clip(self._step()))

    def _step(self) -> Number:
        raise NotImplementedError


class LambdaScheduler(ParameterScheduler):
    """``value = initial_value * lambda_fn(step)``.

    Args:
        obj, param_name, min_value, max_value: see :class:`ParameterScheduler`.
        lambda_fn: the factor of the initial value at each step count.

    Examples:
        >>> from rl_buffers import PrioritizedSampler
        >>> sampler = PrioritizedSampler(10, alpha=0.7, beta=0.4)
        >>> scheduler = LambdaScheduler(sampler, "beta", lambda step: 2.0**step, max_value=1.0)
        >>> scheduler.step(); round(sampler.beta, 6)
        0.8
        >>> scheduler.step(); sampler.beta
        1.0
    """

    def __init__(
        self,
        obj: ReplayBuffer | Sampler,
        param_name: str,
        lambda_fn: Callable[[int], float],
        min_value: Number | None = None,
        max_value: Number | None = None,
    ) -> None:
        super().__init__(obj, param_name, min_value, max_value)
        self.lambda_fn = lambda_fn

    def _step(self) -> Number:
        return self.initial_val * self.lambda_fn(self._step_cnt)


class LinearScheduler(ParameterScheduler):
    """Moves the value linearly from its initial value to ``final_value`` in ``num_steps`` steps.

    Args:
        obj, param_name: see :class:`ParameterScheduler`.
        final_value: the value reached at step ``num_steps`` and kept afterwards.
        num_steps: the number of steps of the ramp.

    Examples:
        >>> from rl_buffers import PrioritizedSampler
        >>> sampler = PrioritizedSampler(10, alpha=0.7, beta=0.6)
        >>> scheduler = LinearScheduler(sampler, param_name="beta", final_value=1.0, num_steps=4)
        >>> for _ in range(5):
        ...     scheduler.step()
        ...     print(round(sampler.beta, 6))
        0.7
        0.8
        0.9
        1.0
        1.0
    """

    def __init__(
        self, obj: ReplayBuffer | Sampler, param_name: str, final_value: Number, num_steps: int
    ) -> None:
        super().__init__(obj, param_name)
        if num_steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {num_steps}.")
        if isinstance(self.initial_val, torch.Tensor):
            final_value = torch.as_tensor(final_value).to(self.initial_val)
        self.final_val = final_value
        self.num_steps = num_steps
        self._delta = (self.final_val - self.initial_val) / num_steps

    def _step(self) -> Number:
        if self._step_cnt < self.num_steps:
            return self.initial_val + self._delta * self._step_cnt
        return self.final_val


class StepScheduler(ParameterScheduler):
    """Every ``n_steps`` steps, adds ``gamma`` to the value (``mode="additive"``) or multiplies
    it by ``gamma`` (``mode="multiplicative"``, the default).

    Args:
        obj, param_name, min_value, max_value: see :class:`ParameterScheduler`.
        gamma: the increment or factor.
        n_steps: steps between two changes.
        mode: ``"multiplicative"`` or ``"additive"``.

    Examples:
        >>> from rl_buffers import PrioritizedSampler
        >>> sampler = PrioritizedSampler(10, alpha=0.7, beta=0.5)
        >>> scheduler = StepScheduler(sampler, "beta", gamma=0.2, mode="additive", max_value=1.0)
        >>> for _ in range(3):
        ...     scheduler.step()
        >>> sampler.beta
        1.0
    """

    def __init__(
        self,
        obj: ReplayBuffer | Sampler,
        param_name: str,
        gamma: Number = 0.9,
        n_steps: int = 1,
        mode: str = "multiplicative",
        min_value: Number | None = None,
        max_value: Number | None = None,
    ) -> None:
        super().__init__(obj, param_name, min_value, max_value)
        if mode not in ("multiplicative", "additive"):
            raise ValueError(f"mode must be 'multiplicative' or 'additive', got {mode!r}.")
        self.gamma, self.n_steps, self.mode = gamma, n_steps, mode

    def _step(self) -> Number:
        current = getattr(self.sampler, self.param_name)
        if self._step_cnt % self.n_steps:
            return current
        return current + self.gamma if self.mode == "additive" else current * self.gamma


class SchedulerList:
    """Steps several schedulers together.

    Args:
        schedulers: a scheduler or a list of them.
    """

    def __init__(self, schedulers: ParameterScheduler | list[ParameterScheduler]) -> None:
        if isinstance(schedulers, ParameterScheduler):
            schedulers = [schedulers]
        self.schedulers = list(schedulers)

    def append(self, scheduler: ParameterScheduler) -> None:
        """Adds a scheduler."""
        self.schedulers.append(scheduler)

    def step(self) -> None:
        """Steps every scheduler, in order."""
        for scheduler in self.schedulers:
            scheduler.step()
