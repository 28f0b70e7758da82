"""``FinancialRegimeEnv``: trading one asset whose price switches between market regimes.

Prices follow a geometric Brownian motion whose drift and volatility come from a hidden
Markov regime (bull or bear), a textbook regime-switching model (Hamilton, 1989,
Econometrica 57(2)). Each trading day the agent holds (0), buys (1) or sells (2) a single
unit; the reward is the day's return on the position held after the action, less a
proportional transaction cost when the position changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs.env_base import EnvBase
from rl_envs.specs import Binary, Categorical, Composite, Unbounded

__all__ = ["FinancialRegimeEnv"]

_DT = 1.0 / 252.0  # one trading day, in years


class FinancialRegimeEnv(EnvBase):
    """Buy / hold / sell one asset in a regime-switching market; episodes last ``max_steps`` days.

    Observations: ``"price_history"`` (float32 ``[window_size]``, the last prices, newest
    last), ``"current_holdings"`` (bool ``[1]``), ``"entry_price"`` (float32 ``[1]``, the
    price paid for the unit held, 0 when flat) and ``"step_count"`` (int64 ``[1]``). The
    hidden regime is a state entry (``"regime"``, int64 ``[1]``: 0 bull, 1 bear) carried in
    the TensorDict. Action ``"action"``: int64 ``[1]`` in {0 hold, 1 buy, 2 sell}; buying
    while holding or selling while flat does nothing. The episode is truncated after
    ``max_steps`` days.

    Reward of a day: ``h' * (p' / p - 1) - transaction_cost * |h' - h|``, where ``h`` / ``h'``
    are the holdings before / after the action and ``p`` / ``p'`` today's and tomorrow's
    price: the position's return, less the cost of a trade as a fraction of the price.

    Args:
        window_size: length of ``"price_history"``.
        initial_price: the price the history ends at on reset.
        max_steps: trading days per episode (252: a year).
        drifts: yearly drift of each regime (bull, bear).
        volatilities: yearly volatility of each regime.
        switch_prob: daily probability of leaving the current regime.
        transaction_cost: cost per trade, a fraction of the price.
        batch_size: markets traded at once.
        device: the device of the tensors.
        seed: seeds the env's own generator (default 0).

    Example:
        >>> env = FinancialRegimeEnv(window_size=5)
        >>> td = env.step(env.reset().set("action", torch.tensor([1])))
        >>> td["next", "current_holdings"].item(), td["next", "price_history"].shape
        (True, torch.Size([5]))
    """

    def __init__(
        self,
        window_size: int = 50,
        initial_price: float = 100.0,
        max_steps: int = 252,
        drifts: Sequence[float] = (0.15, -0.2),
        volatilities: Sequence[float] = (0.15, 0.35),
        switch_prob: float = 0.02,
        transaction_cost: float = 1e-3,
        *,
        batch_size: Sequence[int] | torch.Size | None = None,
        device: Any = None,
        seed: int | None = 0,
    ) -> None:
        super().__init__(device=device, batch_size=batch_size)
        if window_size < 1 or max_steps < 1:
            raise ValueError(
                f"FinancialRegimeEnv: window_size and max_steps must be >= 1, got "
                f"{window_size} and {max_steps}."
            )
        self.window_size = window_size
        self.initial_price = initial_price
        self.max_steps = max_steps
        self.drifts = torch.as_tensor(drifts, dtype=torch.float32, device=self.device)
        self.volatilities = torch.as_tensor(volatilities, dtype=torch.float32, device=self.device)
        self.switch_prob = switch_prob
        self.transaction_cost = transaction_cost
        self.observation_spec = Composite(
            price_history=Unbounded((window_size,)),
            current_holdings=Binary(1, shape=(1,), dtype=torch.bool),
            entry_price=Unbounded((1,)),
            step_count=Unbounded((1,), dtype=torch.int64),
        )
        self.state_spec = Composite(regime=Categorical(2, shape=(1,)))
        self.action_spec = Categorical(3, shape=(1,))
        self.rng = torch.Generator(device=self.device)
        self.set_seed(seed)

    def _noise(self, *shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=self.rng, device=self.device)

    def _next_price(self, price: torch.Tensor, regime: torch.Tensor) -> torch.Tensor:
        mu, sigma = self.drifts[regime], self.volatilities[regime]
        shock = self._noise(*price.shape) * sigma * math.sqrt(_DT)
        return price * torch.exp((mu - 0.5 * sigma**2) * _DT + shock)

    def _switch(self, regime: torch.Tensor) -> torch.Tensor:
        u = torch.rand(regime.shape, generator=self.rng, device=self.device)
        return torch.where(u < self.switch_prob, 1 - regime, regime)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        b = tuple(self.batch_size)
        regime = (torch.rand((*b, 1), generator=self.rng, device=self.device) < 0.5).long()
        # a history that ends at initial_price: walk backwards from it
        prices = [torch.full((*b, 1), self.initial_price, device=self.device)]
        for _ in range(self.window_size - 1):
            prices.append(prices[-1] / (self._next_price(prices[-1], regime) / prices[-1]))
        return TensorDict(
            price_history=torch.cat(prices[::-1], -1),
            current_holdings=torch.zeros((*b, 1), dtype=torch.bool, device=self.device),
            entry_price=torch.zeros((*b, 1), device=self.device),
            step_count=torch.zeros((*b, 1), dtype=torch.int64, device=self.device),
            regime=regime,
            batch_size=b,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        history = tensordict.get("price_history")
        holdings = tensordict.get("current_holdings")
        action = tensordict.get("action").reshape(holdings.shape)
        price = history[..., -1:]
        regime = self._switch(tensordict.get("regime"))
        next_price = self._next_price(price, regime)
        new_holdings = torch.where(action == 1, True, torch.where(action == 2, False, holdings))
        traded = new_holdings != holdings
        entry = torch.where(
            traded, torch.where(new_holdings, price, 0.0), tensordict.get("entry_price")
        )
        reward = new_holdings * (next_price / price - 1) - self.transaction_cost * traded
        steps = tensordict.get("step_count") + 1
        return TensorDict(
            price_history=torch.cat([history[..., 1:], next_price], -1),
            current_holdings=new_holdings,
            entry_price=entry,
            step_count=steps,
            regime=regime,
            reward=reward,
            terminated=torch.zeros_like(holdings),
            truncated=steps >= self.max_steps,
            batch_size=tensordict.batch_size,
            device=self.device,
        )

    def _set_seed(self, seed: int | None) -> None:
        if seed is None:
            self.rng.seed()
        else:
            self.rng.manual_seed(seed)
