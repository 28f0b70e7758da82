"""``MacroActionEnv``: one low-frequency semantic action -> a sequence of low-level controls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs.env_base import EnvBase

__all__ = ["MacroActionEnv"]

Expand = Callable[[torch.Tensor, TensorDictBase], torch.Tensor]


class MacroActionEnv(EnvBase):
    """Runs each macro action as a sequence of low-level steps of a batched env.

    ``expand(macro_action, root)`` turns the macro action ``[*B, *macro]`` and the current
    root TensorDict (observations) into low-level actions ``[K, *B, *action]`` (e.g. the
    ``expand`` method of a :class:`~rl_envs.MacroPrimitiveTransform`); the wrapper
    steps ``env`` ``K`` times and returns the final observation, the SUM of the rewards
    and the done flags. A sub-env that is done part-way through keeps the observation and
    flags of its done step and stops accumulating reward (its later low-level steps are
    discarded).

    An env wrapper rather than a ``Transform``: one macro step runs several steps of the
    wrapped env, which a transform of ``TransformedEnv`` cannot do.

    Args:
        env: the low-level env (its batch size and observation/reward/done specs are kept).
        expand: see above.
        macro_action_spec: the spec of the macro action (without or with batch dims).

    Example:
        >>> from rl_envs import Bounded, PendulumEnv
        >>> low = PendulumEnv(batch_size=[2])
        >>> repeat = lambda a, root: a.expand(4, *a.shape)  # hold the torque 4 steps
        >>> env = MacroActionEnv(low, repeat, Bounded(-2.0, 2.0, shape=(1,)))
        >>> env.rollout(3)["next", "reward"].shape
        torch.Size([2, 3, 1])
    """

    def __init__(self, env: EnvBase, expand: Expand, macro_action_spec: Any) -> None:
        super().__init__(device=env.device, batch_size=env.batch_size)
        self.env = env
        self.expand = expand
        self.full_observation_spec = env.full_observation_spec.clone()
        self.full_reward_spec = env.full_reward_spec.clone()
        self.full_done_spec = env.full_done_spec.clone()
        self.action_spec = macro_action_spec
        self._last: TensorDictBase | None = None

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        td = None if tensordict is None else tensordict.select("_reset", strict=False)
        out = self.env.reset(td, **kwargs)
        return out.exclude("_reset")

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        plan = self.expand(tensordict.get("action"), tensordict)
        b = self.batch_size
        bdims = len(b)
        low_key = self.env.action_key
        obs_keys = self.env.observation_keys
        out: TensorDictBase | None = None
        total = None
        alive = torch.ones((*b, 1), dtype=torch.bool, device=self.device)
        for k in range(plan.shape[0]):
            low = TensorDict({low_key: plan[k]}, batch_size=b, device=self.device)
            nxt = self.env.step(low).get("next")
            reward = nxt.get("reward")
            total = (
                torch.where(alive, reward, 0)
                if total is None
                else total + torch.where(alive, reward, 0)
            )
            if out is None:
                out = nxt.select(*obs_keys, *self.env.done_keys)
            else:
                for key in (*obs_keys, *self.env.done_keys):
                    value = nxt.get(key)
                    keep = alive.reshape(*b, *([1] * (value.ndim - bdims)))
                    out.set(key, torch.where(keep, value, out.get(key)))
            alive = alive & ~nxt.get("done").reshape(*b, 1)
            if not bool(alive.any()):
                break
        assert out is not None and total is not None, "expand() returned an empty plan"
        out.set("reward", total)
        return out

    def _set_seed(self, seed: int | None) -> None:
        self.env.set_seed(seed)

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Closes the low-level env (``raise_if_closed``: TorchRL's keyword; closing twice
        is silent)."""
        self.is_closed = True
        self.env.close()
