"""``NormalizeReward``: rewards divided by the running scale of the discounted return."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, get_or_raise, reset_mask, unbounded_like
from rl_envs.transforms.transform import Transform


class NormalizeReward(Transform):
    """Scales each reward by the running standard deviation of the discounted return.

    The reward normalisation of Stable-Baselines3's ``VecNormalize`` and Gymnasium's
    ``NormalizeReward`` (Engstrom et al., 2020, "Implementation Matters in Deep Policy
    Gradients"): each env keeps ``G <- gamma * G + r``; the running variance of ``G``
    over all steps and envs is updated (unless :attr:`frozen`), the reward becomes
    ``clamp(r / sqrt(var + eps), -clip, clip)``, and ``G`` restarts at 0 where the
    step is done. Rewards are scaled, not centred, so their sign is kept.

    Place it after any transform that should see the raw reward (e.g. ``RewardSum``,
    for logging true returns), and leave it out of evaluation envs.

    Args:
        gamma: discount of the running return (use the agent's).
        eps: added to the variance.
        clip: bound of the normalised reward (``inf``: no clipping).
        in_keys: rewards (default ``["reward"]``).
        out_keys: destinations (default ``in_keys``).
        done_key: where the step's done flag is read.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = NormalizeReward(gamma=0.0, eps=0.0)
        >>> step = TensorDict(reward=torch.tensor([[3.0], [-1.0]]), done=torch.zeros(2, 1, dtype=torch.bool))
        >>> t._step(TensorDict(batch_size=[2]), step.clone())["reward"].squeeze(-1)  # var of G = 4
        tensor([ 1.5000, -0.5000])
    """

    def __init__(
        self,
        gamma: float = 0.99,
        eps: float = 1e-8,
        clip: float = 10.0,
        in_keys: list[NestedKey] | None = None,
        out_keys: list[NestedKey] | None = None,
        done_key: NestedKey = "done",
    ) -> None:
        super().__init__(in_keys if in_keys is not None else ["reward"], out_keys)
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"NormalizeReward: gamma must be in [0, 1], got {gamma}.")
        self.gamma, self.eps, self.clip, self.done_key = float(gamma), float(eps), clip, done_key
        self.frozen = False
        # Chan et al.'s parallel moments of G, over every (step, env); a tiny prior count
        # keeps the first update finite, as in SB3's RunningMeanStd.
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("var", torch.ones((), dtype=torch.float64))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))
        self._returns: dict[NestedKey, torch.Tensor] = {}

    def freeze(self) -> NormalizeReward:
        """Stops the statistics' updates (scaling goes on with the current ones)."""
        self.frozen = True
        return self

    def unfreeze(self) -> NormalizeReward:
        """Resumes the updates."""
        self.frozen = False
        return self

    @property
    def scale(self) -> torch.Tensor:
        """The current divisor ``sqrt(var + eps)``."""
        return (self.var + self.eps).sqrt()

    def _scaled(self, reward: torch.Tensor) -> torch.Tensor:
        return (reward / self.scale.to(reward.dtype)).clamp(-self.clip, self.clip)

    def _update(self, returns: torch.Tensor) -> None:
        x = returns.detach().to(torch.float64).reshape(-1)
        n = x.numel()
        batch_mean, batch_var = x.mean(), x.var(unbiased=False)
        delta = batch_mean - self.mean
        total = self.count + n
        m2 = self.var * self.count + batch_var * n + delta.pow(2) * self.count * n / total
        self.mean += delta * n / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        mask = reset_mask(tensordict)
        for key, returns in self._returns.items():
            if mask is None:
                self._returns[key] = torch.zeros_like(returns)
            else:
                fresh = mask.reshape(*mask.shape[: returns.ndim - 1], -1)[..., :1]
                self._returns[key] = returns.masked_fill(fresh.expand_as(returns), 0.0)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        done = next_tensordict.get(self.done_key, None)
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            reward = get_or_raise(self, next_tensordict, in_key)
            returns = self._returns.get(in_key)
            if returns is None or returns.shape != reward.shape:
                returns = torch.zeros_like(reward, dtype=torch.float64)
            returns = returns * self.gamma + reward.to(torch.float64)
            if not self.frozen:
                self._update(returns)
            next_tensordict.set(out_key, self._scaled(reward))
            if done is not None:
                returns = returns.masked_fill(done.reshape(returns.shape), 0.0)
            self._returns[in_key] = returns
        return next_tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Outside an env (e.g. a stored batch): scale only, with the current statistics."""
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            reward = get_or_raise(self, next_tensordict, in_key)
            next_tensordict.set(out_key, self._scaled(reward))
        return next_tensordict

    def transform_leaf_spec(self, spec: Any) -> Any:
        """Scaled rewards are unbounded."""
        return unbounded_like(spec)
