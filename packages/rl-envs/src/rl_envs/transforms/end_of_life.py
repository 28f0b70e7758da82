"""``EndOfLifeTransform``: flags the steps where an Atari-style game loses a life."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.specs import Unbounded
from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import FORWARD_NOT_IMPLEMENTED, EnvSpecs, Transform


class EndOfLifeTransform(Transform):
    """Writes ``eol_key`` (a life was lost, or the episode is done) and ``lives_key``.

    The life count is read from the base env through ``eol_attribute`` (a dotted path,
    e.g. a Gymnasium Atari env's ``unwrapped.ale.lives``; called if callable, one per
    sub-env if the path yields a list). The episode goes on after a lost life: give a
    loss ``eol_key`` as its done / terminated key (:meth:`register_keys`) to bootstrap
    as if each life were an episode (Mnih et al., 2015, "Human-level control through
    deep reinforcement learning").

    Args:
        eol_key: where the end-of-life flag is written (shaped like ``done_key``).
        lives_key: where the life count is written.
        done_key: the episode's done flag.
        eol_attribute: the dotted path of the life count on the base env.

    Example:
        >>> from types import SimpleNamespace
        >>> from rl_envs import PendulumEnv, TransformedEnv
        >>> base = PendulumEnv()
        >>> base.unwrapped = SimpleNamespace(ale=SimpleNamespace(lives=lambda: 3))
        >>> env = TransformedEnv(base, EndOfLifeTransform())
        >>> td = env.rollout(2)
        >>> td["next", "lives"].tolist(), td["next", "end-of-life"].any().item()
        ([3, 3], False)
    """

    NO_PARENT_ERR = (
        "The {} transform is being executed without a parent env. This is currently not supported."
    )

    def __init__(
        self,
        eol_key: NestedKey = "end-of-life",
        lives_key: NestedKey = "lives",
        done_key: NestedKey = "done",
        eol_attribute: str = "unwrapped.ale.lives",
    ) -> None:
        super().__init__(in_keys=[done_key], out_keys=[eol_key])
        self.eol_key = eol_key
        self.lives_key = lives_key
        self.done_key = done_key
        self.eol_attribute = eol_attribute.split(".")

    def _base_env(self) -> Any:
        env = self._env_and_index()[0]
        if env is None:
            raise RuntimeError(self.NO_PARENT_ERR.format(type(self).__name__))
        return env.base_env

    def _lives(self) -> torch.Tensor:
        value: Any = self._base_env()
        for name in self.eol_attribute:
            value = (
                [getattr(v, name) for v in value]
                if isinstance(value, list)
                else getattr(value, name)
            )
        if isinstance(value, list):
            value = [v() if callable(v) else v for v in value]
        elif callable(value):
            value = value()
        return torch.as_tensor(value, dtype=torch.int64)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        lives = self._lives()
        done = next_tensordict.get(self.done_key, None)
        if done is None:
            raise KeyError(
                f"EndOfLifeTransform reads the done flag {self.done_key!r}, absent from the step "
                f"(keys: {sorted(map(str, next_tensordict.keys(True, True)))}): pass done_key=."
            )
        previous = tensordict.get(self.lives_key, None)
        lost = torch.zeros_like(done) if previous is None else (previous > lives)
        lost = lost.reshape(*lost.shape, *[1] * (done.ndim - lost.ndim)).expand_as(done)
        next_tensordict.set(self.eol_key, lost.to(done.device) | done)
        next_tensordict.set(self.lives_key, lives.to(done.device))
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        lives = self._lives()
        done = tensordict_reset.get(self.done_key)
        tensordict_reset.set(self.eol_key, torch.zeros_like(done))
        tensordict_reset.set(self.lives_key, lives.to(done.device))
        return tensordict_reset

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        batch = specs.done.shape
        specs.observation[self.eol_key] = specs.done[self.done_key].clone()
        specs.observation[self.lives_key] = Unbounded(
            shape=batch, dtype=torch.int64, device=specs.done.device
        )
        return specs

    def register_keys(self, loss_or_advantage: Any) -> None:
        """Makes a loss (or value estimator) read ``eol_key`` as its done and terminated."""
        loss_or_advantage.set_keys(done=self.eol_key, terminated=self.eol_key)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))

    def extra_repr(self) -> str:
        return f"eol_key={self.eol_key!r}, lives_key={self.lives_key!r}"
