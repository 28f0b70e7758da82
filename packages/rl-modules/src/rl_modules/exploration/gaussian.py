"""Additive Gaussian exploration noise with an annealed scale."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from rl_modules._keys import check_in_keys
from rl_modules._spec import project_into, spec_of_key
from rl_modules.exploration.egreedy import linear_annealing
from rl_modules.exploration_type import ExplorationType, exploration_type


class AdditiveGaussianModule(TensorDictModuleBase):
    """``action + sigma * N(mean, std)``, projected into the spec (TD3's exploration).

    Noise is added when the exploration type is ``RANDOM`` or unset. ``sigma``
    goes linearly from ``sigma_init`` to ``sigma_end`` over
    ``annealing_num_steps`` calls to :meth:`step`.

    Args:
        spec: spec-like action spec (``project`` keeps the action in bounds when ``safe``);
            ``None`` to set it later through :attr:`spec` (e.g. with
            :func:`set_exploration_modules_spec_from_env`), before the first call.
        sigma_init: initial scale.
        sigma_end: final scale.
        annealing_num_steps: annealing length.
        mean: mean of the noise.
        std: standard deviation of the noise (before ``sigma``).
        action_key: the action entry.
        safe: project the noisy action into ``spec``.
        device: where the annealing buffers live.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Box:
        ...     def project(self, v):
        ...         return v.clamp(-1, 1)
        >>> noise = AdditiveGaussianModule(Box(), sigma_init=0.5)
        >>> td = noise(TensorDict(action=torch.zeros(8, 2), batch_size=[8]))
        >>> bool(td["action"].abs().max() <= 1)
        True
    """

    def __init__(
        self,
        spec: Any = None,
        sigma_init: float = 1.0,
        sigma_end: float = 0.1,
        annealing_num_steps: int = 1000,
        mean: float = 0.0,
        std: float = 1.0,
        *,
        action_key: NestedKey = "action",
        safe: bool = True,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self._spec, self.safe = spec, safe
        self.sigma_init, self.sigma_end = float(sigma_init), float(sigma_end)
        self.annealing_num_steps = int(annealing_num_steps)
        self.mean, self.std = float(mean), float(std)
        self.action_key = action_key
        self.in_keys = [action_key]
        self.out_keys = [action_key]
        self.register_buffer("sigma", torch.tensor(self.sigma_init, device=device))
        self.register_buffer("_steps", torch.tensor(0, dtype=torch.long, device=device))

    @property
    def spec(self) -> Any:
        """The action spec the noisy action is projected into (``None``: not set yet)."""
        return self._spec

    @spec.setter
    def spec(self, value: Any) -> None:
        self._spec = value

    def step(self, frames: int = 1) -> None:
        """Advance the annealing of ``sigma`` by ``frames`` steps."""
        self._steps += frames
        self.sigma.fill_(
            linear_annealing(
                self.sigma_init, self.sigma_end, self.annealing_num_steps, int(self._steps)
            )
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if exploration_type() not in (ExplorationType.RANDOM, None):
            return tensordict
        check_in_keys(tensordict, self.in_keys, type(self).__name__)
        action = tensordict.get(self.action_key)
        noise = torch.randn_like(action) * self.std + self.mean
        action = action + self.sigma.to(action) * noise
        if self.safe:
            if self._spec is None:
                raise RuntimeError(
                    "AdditiveGaussianModule: the spec has not been set; pass spec= at "
                    "construction, set module.spec (set_exploration_modules_spec_from_env(policy, "
                    "env) does it from an env), or build it with safe=False."
                )
            spec = spec_of_key(self._spec, self.action_key, type(self).__name__)
            if spec is not None:  # a Composite may declare the key without a spec (TorchRL)
                action = project_into(spec, action, type(self).__name__)
        tensordict.set(self.action_key, action)
        return tensordict
