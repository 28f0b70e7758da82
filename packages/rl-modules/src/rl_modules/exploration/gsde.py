"""Generalized state-dependent exploration (gSDE; Raffin, Kober and Stulp, 2021, arXiv:2005.05719)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin
from torch.nn.parameter import UninitializedBuffer, UninitializedParameter

from rl_modules.exploration_type import ExplorationType, exploration_type


def _inv_softplus(x: torch.Tensor | float) -> torch.Tensor:
    x = torch.as_tensor(x, dtype=torch.get_default_dtype())
    return x.expm1().log()


class gSDEModule(nn.Module):
    """Adds state-dependent noise ``(sigma * eps) @ state`` to an action.

    ``forward(mu, state, eps)`` returns ``(mu, scale, action, eps)``: ``mu``
    unchanged; ``scale = sqrt(sum_j (sigma_ij * state_j)^2)``, the standard
    deviation of the action; ``action = mu + (sigma * eps) @ state`` when the
    exploration type is ``RANDOM``, else ``mu``; and the noise matrix ``eps``
    (``[*B, action_dim, state_dim]``). The noise is kept from call to call
    (write it back to the TensorDict: ``out_keys=[..., "_eps_gSDE"]``) and
    drawn again when it is absent (``RANDOM``) or all zeros (an env's
    ``gSDENoise`` transform resets it to zeros at the start of a trajectory).

    ``sigma = softplus(log_sigma)`` (learned) or a fixed buffer, clamped to
    ``[scale_min, scale_max]``.

    Args:
        action_dim: action size.
        state_dim: state (feature) size.
        sigma_init: initial ``sigma``. Defaults to ``sqrt((1 - scale_min) / state_dim)``.
        scale_min: lower bound of ``sigma``.
        scale_max: upper bound of ``sigma``.
        learn_sigma: make ``sigma`` a parameter (through ``log_sigma``).
        transform: optional ``torch.distributions.Transform`` applied to the action.
        device: where the parameters live.

    Examples:
        >>> import torch
        >>> from rl_modules import ExplorationType, set_exploration_type
        >>> gsde = gSDEModule(action_dim=2, state_dim=3)
        >>> with set_exploration_type(ExplorationType.RANDOM):
        ...     mu, scale, action, eps = gsde(torch.zeros(4, 2), torch.randn(4, 3), None)
        >>> action.shape, eps.shape
        (torch.Size([4, 2]), torch.Size([4, 2, 3]))
    """

    def __init__(
        self,
        action_dim: int,
        state_dim: int,
        sigma_init: float | None = None,
        scale_min: float = 0.01,
        scale_max: float = 10.0,
        learn_sigma: bool = True,
        transform: torch.distributions.Transform | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.action_dim, self.state_dim = action_dim, state_dim
        self.scale_min, self.scale_max = scale_min, scale_max
        self.learn_sigma, self.transform = learn_sigma, transform
        if sigma_init is None:
            sigma_init = math.sqrt((1.0 - scale_min) / max(state_dim, 1))
        shape = (action_dim, state_dim)
        if learn_sigma:
            log_sigma = _inv_softplus(sigma_init) if sigma_init > 0 else torch.tensor(0.0)
            self.log_sigma = nn.Parameter(torch.full(shape, float(log_sigma), device=device))
        else:
            self.register_buffer("_sigma", torch.full(shape, float(sigma_init), device=device))

    @property
    def sigma(self) -> torch.Tensor:
        """The noise scale matrix ``[action_dim, state_dim]`` (lower-clamped at ``scale_min``)."""
        raw = nn.functional.softplus(self.log_sigma) if self.learn_sigma else self._sigma
        return raw.clamp_min(self.scale_min)

    def forward(
        self, mu: torch.Tensor, state: torch.Tensor, _eps_gSDE: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        who = type(self).__name__
        sigma = self.sigma.clamp_max(self.scale_max)
        batch = state.shape[:-1]
        if mu.shape[:-1] != batch:
            raise RuntimeError(
                f"{who}: mu and state must share their batch dims, got shapes "
                f"{tuple(mu.shape)} and {tuple(state.shape)}."
            )
        eps = _eps_gSDE
        if eps is not None and eps.shape[: len(batch)] != batch:
            raise RuntimeError(
                f"{who}: the noise and the state must share their batch dims, got shapes "
                f"{tuple(eps.shape)} and {tuple(state.shape)}."
            )
        random = exploration_type() is ExplorationType.RANDOM
        shape = (*batch, *sigma.shape)
        if eps is None:
            if random:
                eps = torch.randn(shape, device=sigma.device, dtype=sigma.dtype)
            else:  # the noise plays no role outside RANDOM
                eps = torch.zeros(shape, device=sigma.device, dtype=sigma.dtype)
        elif eps.numel() == batch.numel() and not bool(eps.any()):
            # a reset marker (zeros, one per env): draw the trajectory's noise now
            eps = torch.randn(shape, device=sigma.device, dtype=sigma.dtype)
        noise = ((sigma * eps) @ state.unsqueeze(-1)).squeeze(-1) if random else None
        action = mu if noise is None else mu + noise
        scale = (sigma * state.unsqueeze(-2)).pow(2).sum(-1).clamp_min(1e-5).sqrt()
        if self.transform is not None:
            action = self.transform(action)
        return mu, scale, action, eps


class LazygSDEModule(LazyModuleMixin, gSDEModule):
    """A :class:`gSDEModule` whose sizes (and ``sigma``) are set by the first call.

    ``action_dim`` and ``state_dim`` are read from the first ``mu`` and
    ``state``; ``sigma`` is initialised so that the action's standard
    deviation is about ``sigma_init`` (1 by default) for states like the
    first batch: ``sigma_j = sigma_init * sqrt(1 / (state_dim * E[state_j^2]))``.

    Args:
        sigma_init: target initial standard deviation of the action (default 1).
        scale_min, scale_max, learn_sigma, transform, device: as :class:`gSDEModule`.

    Examples:
        >>> import torch
        >>> from rl_modules import ExplorationType, set_exploration_type
        >>> gsde = LazygSDEModule()
        >>> with set_exploration_type(ExplorationType.RANDOM):
        ...     _, scale, action, _ = gsde(torch.zeros(1000, 2), torch.randn(1000, 3) * 5, None)
        >>> type(gsde).__name__, round(scale.mean().item())
        ('gSDEModule', 1)
    """

    cls_to_become = gSDEModule

    def __init__(
        self,
        sigma_init: float | None = None,
        scale_min: float = 0.01,
        scale_max: float = 10.0,
        learn_sigma: bool = True,
        transform: torch.distributions.Transform | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(0, 0, 0.0, scale_min, scale_max, learn_sigma, transform, device)
        self._sigma_init = sigma_init
        if learn_sigma:
            self.log_sigma = UninitializedParameter(device=device)
        else:
            self._sigma = UninitializedBuffer(device=device)

    def reset_parameters(self) -> None:
        """Nothing to do before the first call."""

    def initialize_parameters(
        self, mu: torch.Tensor, state: torch.Tensor, _eps_gSDE: torch.Tensor | None = None
    ) -> None:
        if not self.has_uninitialized_params():
            return
        self.action_dim, self.state_dim = mu.shape[-1], state.shape[-1]
        with torch.no_grad():
            flat = state.reshape(-1, self.state_dim)
            if flat.shape[0] > 1:
                inv_second_moment = flat.pow(2).mean(0).reciprocal()
            else:
                inv_second_moment = torch.ones(1, device=state.device, dtype=state.dtype)
            if self.learn_sigma and self._sigma_init is None:
                inv_second_moment = inv_second_moment.clamp_min(self.scale_min)
            sigma = (inv_second_moment / self.state_dim).sqrt() * (self._sigma_init or 1.0)
            shape = (self.action_dim, self.state_dim)
            if self.learn_sigma:
                self.log_sigma.materialize(shape)
                self.log_sigma.copy_(_inv_softplus(sigma).expand(shape))
            else:
                self._sigma.materialize(shape)
                self._sigma.copy_(sigma.expand(shape))
