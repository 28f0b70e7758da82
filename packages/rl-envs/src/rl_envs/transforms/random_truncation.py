"""``RandomTruncationTransform``: per-env random horizons, so batched envs do not reset in step."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from rl_envs.specs import Categorical
from rl_envs.transforms._utils import spec_has
from rl_envs.transforms.transform import EnvSpecs, Transform


class RandomTruncationTransform(Transform):
    """Truncates each env of a batch at its own random horizon (needs a ``StepCounter`` before).

    Batched envs sharing one episode length all reset at the same steps, filling a
    replay buffer with waves of episode starts. At the first reset each env draws a
    horizon uniformly in ``[1, max_horizon]``; at each later partial reset an env draws a
    new one in ``[min_horizon, max_horizon]`` with probability ``prob`` (its first episode
    after the spread: ``first_episode_prob``) and otherwise runs the full ``max_horizon``.
    A step whose ``step_count`` reaches the horizon sets ``truncated`` and ``done``.

    Args:
        min_horizon: the shortest random horizon (>= 1).
        max_horizon: the longest one, and the horizon when no truncation is drawn.
        prob: the probability of a random horizon at each later reset (default 0).
        first_episode_prob: the same for each env's first episode after the spread
            (default ``prob``).

    Example:
        >>> import torch
        >>> from rl_envs import Compose, PendulumEnv, StepCounter, TransformedEnv
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> env = TransformedEnv(
        ...     PendulumEnv(), Compose(StepCounter(), RandomTruncationTransform(2, 4))
        ... )
        >>> env.rollout(10)["next", "step_count"].max().item() <= 4
        True
    """

    def __init__(
        self,
        min_horizon: int,
        max_horizon: int,
        prob: float = 0.0,
        first_episode_prob: float | None = None,
    ) -> None:
        first_episode_prob = prob if first_episode_prob is None else first_episode_prob
        for name, value in (("prob", prob), ("first_episode_prob", first_episode_prob)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(
                    f"RandomTruncationTransform: {name} must be in [0, 1], got {value}"
                )
        for name, value in (("min_horizon", min_horizon), ("max_horizon", max_horizon)):
            if value < 1:
                raise ValueError(f"RandomTruncationTransform: {name} must be >= 1, got {value}")
        if min_horizon > max_horizon:
            raise ValueError(
                f"RandomTruncationTransform: min_horizon ({min_horizon}) must be <= "
                f"max_horizon ({max_horizon})"
            )
        super().__init__()
        self.min_horizon = int(min_horizon)
        self.max_horizon = int(max_horizon)
        self.prob = float(prob)
        self.first_episode_prob = float(first_episode_prob)
        self._horizons: torch.Tensor | None = None
        self._first_episode: torch.Tensor | None = None
        self._initialized = False

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        step_count = next_tensordict.get("step_count", None)
        if step_count is None or self._horizons is None:
            return next_tensordict
        hit = step_count >= self._horizons
        for key in ("truncated", "done"):
            flag = next_tensordict.get(key, None)
            next_tensordict.set(key, hit if flag is None else flag | hit)
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        step_count = tensordict_reset.get("step_count", None)
        if step_count is None:
            return tensordict_reset
        done = tensordict_reset.get("done", None)
        if done is not None:
            tensordict_reset.set("truncated", torch.zeros_like(done))
        device = step_count.device
        if not self._initialized:  # spread every env over the whole horizon
            self._horizons = torch.randint(1, self.max_horizon + 1, step_count.shape, device=device)
            self._first_episode = torch.ones(step_count.shape, dtype=torch.bool, device=device)
            self._initialized = True
            return tensordict_reset
        reset = tensordict.get("_reset", None) if tensordict is not None else None
        if reset is None:
            return tensordict_reset
        mask = reset.reshape(self._horizons.shape).bool()
        drawn = torch.randint(
            self.min_horizon, self.max_horizon + 1, self._horizons.shape, device=device
        )
        prob = torch.where(self._first_episode, self.first_episode_prob, self.prob)
        full = torch.rand(self._horizons.shape, device=device) >= prob
        new = torch.where(full, torch.full_like(drawn, self.max_horizon), drawn)
        self._horizons = torch.where(mask, new, self._horizons)
        self._first_episode = self._first_episode & ~mask
        return tensordict_reset

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        if not any(
            k == "step_count" or (isinstance(k, tuple) and k[-1] == "step_count")
            for k in specs.observation.keys(True, True)
        ):
            raise RuntimeError(
                "RandomTruncationTransform requires a StepCounter earlier in the transform "
                "chain: use Compose(StepCounter(), RandomTruncationTransform(...))."
            )
        if not spec_has(specs.done, "truncated"):
            done = specs.done["done"]
            specs.done["truncated"] = Categorical(
                2, shape=done.shape, dtype=torch.bool, device=done.device
            )
        return specs

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "RandomTruncationTransform cannot be called independently, only its step and "
            "reset methods are functional: use it in a TransformedEnv after a StepCounter."
        )

    def extra_repr(self) -> str:
        return (
            f"min_horizon={self.min_horizon}, max_horizon={self.max_horizon}, prob={self.prob}, "
            f"first_episode_prob={self.first_episode_prob}"
        )
