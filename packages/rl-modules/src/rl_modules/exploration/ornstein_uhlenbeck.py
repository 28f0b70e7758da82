"""Ornstein-Uhlenbeck exploration noise whose state lives in the TensorDict."""

from __future__ import annotations

import math
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from rl_modules._keys import check_in_keys
from rl_modules._spec import project_into, spec_of_key
from rl_modules.exploration.egreedy import linear_annealing
from rl_modules.exploration_type import ExplorationType, exploration_type


def ou_step(
    prev: torch.Tensor, theta: float, mu: float, sigma: torch.Tensor | float, dt: float
) -> torch.Tensor:
    """One Euler-Maruyama step: ``x + theta (mu - x) dt + sigma sqrt(dt) N(0, 1)``."""
    return prev + theta * (mu - prev) * dt + sigma * math.sqrt(dt) * torch.randn_like(prev)


class OrnsteinUhlenbeckProcessModule(TensorDictModuleBase):
    """Temporally correlated noise added to the action (DDPG, Lillicrap et al., 2016).

    The noise state and its step count are entries of the TensorDict
    (``"_ou_prev_noise"``, ``"_ou_steps"``, configurable), so each env of a
    batch has its own process and the state follows the data: the env must
    carry them from step to step (``step_mdp`` keeps root entries). They are
    reset (to ``x0``, 0 steps) where ``is_init`` is ``True`` or when absent.
    The per-process ``sigma`` anneals from ``sigma`` to ``sigma_min`` over
    ``n_steps_annealing`` steps; the global factor ``eps`` anneals from
    ``eps_init`` to ``eps_end`` over ``annealing_num_steps`` calls to :meth:`step`.

    Args:
        spec: spec-like action spec (``project`` is used when ``safe``).
        eps_init, eps_end, annealing_num_steps: global noise factor schedule.
        theta, mu, sigma, dt: OU parameters.
        x0: initial noise value (default 0).
        sigma_min: final ``sigma`` (default: ``sigma``, no annealing).
        n_steps_annealing: per-process annealing length of ``sigma``.
        action_key: the action entry.
        is_init_key: the trajectory-start flag.
        noise_key, steps_key: where the process state is stored.
        safe: project the noisy action into ``spec``.
        device: where the annealing buffers live.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Box:
        ...     def project(self, v):
        ...         return v.clamp(-1, 1)
        >>> ou = OrnsteinUhlenbeckProcessModule(Box())
        >>> td = ou(TensorDict(action=torch.zeros(4, 2), is_init=torch.ones(4, 1, dtype=torch.bool), batch_size=[4]))
        >>> td["_ou_prev_noise"].shape, td["_ou_steps"].shape
        (torch.Size([4, 2]), torch.Size([4, 1]))
    """

    def __init__(
        self,
        spec: Any,
        eps_init: float = 1.0,
        eps_end: float = 0.1,
        annealing_num_steps: int = 1000,
        theta: float = 0.15,
        mu: float = 0.0,
        sigma: float = 0.2,
        dt: float = 1e-2,
        x0: float | torch.Tensor = 0.0,
        sigma_min: float | None = None,
        n_steps_annealing: int = 1000,
        *,
        action_key: NestedKey = "action",
        is_init_key: NestedKey = "is_init",
        noise_key: NestedKey = "_ou_prev_noise",
        steps_key: NestedKey = "_ou_steps",
        safe: bool = True,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if safe and spec is None:
            raise RuntimeError(
                "OrnsteinUhlenbeckProcessModule: spec cannot be None. safe=True projects the noisy "
                "action into it; pass the action spec, or safe=False."
            )
        self.spec, self.safe = spec, safe
        self.eps_init, self.eps_end = float(eps_init), float(eps_end)
        self.annealing_num_steps = int(annealing_num_steps)
        self.theta, self.mu, self.sigma, self.dt = theta, mu, sigma, dt
        self.x0 = x0
        self.sigma_min = sigma if sigma_min is None else sigma_min
        self.n_steps_annealing = n_steps_annealing
        self.action_key, self.is_init_key = action_key, is_init_key
        self.noise_key, self.steps_key = noise_key, steps_key
        self.in_keys = [action_key, is_init_key, noise_key, steps_key]
        self.out_keys = [action_key, noise_key, steps_key]
        self.register_buffer("eps", torch.tensor(self.eps_init, device=device))
        self.register_buffer("_steps", torch.tensor(0, dtype=torch.long, device=device))

    def step(self, frames: int = 1) -> None:
        """Advance the annealing of ``eps`` by ``frames`` steps."""
        self._steps += frames
        self.eps.fill_(
            linear_annealing(
                self.eps_init, self.eps_end, self.annealing_num_steps, int(self._steps)
            )
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if exploration_type() not in (ExplorationType.RANDOM, None):
            return tensordict
        check_in_keys(tensordict, [self.action_key], type(self).__name__)
        action = tensordict.get(self.action_key)
        batch = tensordict.batch_size
        flag_shape = (*batch, 1)
        prev = tensordict.get(self.noise_key, None)
        steps = tensordict.get(self.steps_key, None)
        is_init = tensordict.get(self.is_init_key, None)
        # the noise process is real-valued even for integer actions (then projected into the spec)
        dtype = action.dtype if action.is_floating_point() else torch.get_default_dtype()
        x0 = torch.as_tensor(self.x0, dtype=dtype, device=action.device).expand_as(action)
        if prev is None or steps is None:
            prev, steps = (
                x0.clone(),
                torch.zeros(flag_shape, dtype=torch.long, device=action.device),
            )
        if is_init is not None:
            reset = is_init.reshape(*batch, *([1] * (action.ndim - len(batch))))
            prev = torch.where(reset, x0, prev)
            steps = torch.where(is_init.reshape(flag_shape), torch.zeros_like(steps), steps)
        frac = (steps.float() / max(self.n_steps_annealing, 1)).clamp(max=1.0)
        sigma = self.sigma + frac * (self.sigma_min - self.sigma)
        sigma = sigma.reshape(*batch, *([1] * (action.ndim - len(batch)))).to(dtype)
        noise = ou_step(prev, self.theta, self.mu, sigma, self.dt)
        action = action + self.eps.to(noise) * noise
        if self.safe:
            spec = spec_of_key(self.spec, self.action_key, type(self).__name__)
            if spec is not None:  # a Composite may declare the key without a spec (TorchRL)
                action = project_into(spec, action, type(self).__name__)
        tensordict.set(self.action_key, action)
        tensordict.set(self.noise_key, noise)
        tensordict.set(self.steps_key, steps + 1)
        return tensordict
