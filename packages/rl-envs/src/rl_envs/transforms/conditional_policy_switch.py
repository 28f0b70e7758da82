"""``ConditionalPolicySwitch``: another policy plays the steps where a condition holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms.transform import Transform
from rl_envs.utils import step_mdp

_STANDALONE = (
    "ConditionalPolicySwitch cannot be called independently, only its step and reset "
    "methods are functional."
)


def _rows_where(mask: torch.Tensor, a: TensorDictBase, b: TensorDictBase) -> TensorDictBase:
    """``a`` where ``mask`` (``[*B]``) else ``b``, for the tensor entries of ``a``."""
    out = a.clone(False)
    nb = a.batch_dims
    for key in a.keys(True, True):
        va, vb = a.get(key), b.get(key, None)
        if not isinstance(va, torch.Tensor) or not isinstance(vb, torch.Tensor):
            continue
        if va.shape == vb.shape:
            out.set(key, torch.where(mask.reshape(*mask.shape, *[1] * (va.ndim - nb)), va, vb))
    return out


class ConditionalPolicySwitch(Transform):
    """Where ``condition`` holds after a step (or a reset), ``policy`` acts and the env
    beneath steps again; the caller sees the state after that extra step.

    E.g. a two-player game: the agent's policy is the rollout's, the opponent's is
    ``policy``, and ``condition`` says whose turn it is. The extra step goes through the
    base env and the transforms placed before this one; place it last so that
    ``policy`` sees transformed data. In a batched env only the entries where the
    condition holds (and that are not done) take the extra step.

    Args:
        policy: ``td -> td`` writing the action(s) of the extra step.
        condition: ``td -> bool`` or a bool tensor of the batch shape (or one element),
            evaluated on each step's (and reset's) output.

    Raises:
        RuntimeError: called on a TensorDict outside an env.

    Example:
        >>> import torch
        >>> from rl_envs import PendulumEnv, StepCounter, TransformedEnv, Compose
        >>> opponent = lambda td: td.set("action", torch.ones(1))
        >>> env = TransformedEnv(PendulumEnv(), Compose(
        ...     StepCounter(), ConditionalPolicySwitch(opponent, lambda td: td["step_count"] % 2 == 1)))
        >>> env.rollout(3, policy=lambda td: td.set("action", torch.zeros(1)))["step_count"].flatten().tolist()
        [0, 2, 4]
    """

    steps_inner_env = True

    def __init__(
        self,
        policy: Callable[[TensorDictBase], TensorDictBase],
        condition: Callable[[TensorDictBase], bool | torch.Tensor],
    ) -> None:
        super().__init__()
        self.__dict__["policy"] = policy  # not a sub-module: the env does not own it
        self.condition = condition

    def _cond(self, tensordict: TensorDictBase) -> torch.Tensor:
        cond = self.condition(tensordict)
        if isinstance(cond, bool):
            cond = torch.tensor(cond, device=tensordict.device)
        if not isinstance(cond, torch.Tensor):
            raise RuntimeError(
                "ConditionalPolicySwitch: the condition must return a bool or a bool tensor, "
                f"got {type(cond).__name__}."
            )
        if tuple(cond.shape) not in ((), (1,), tuple(tensordict.batch_size)):
            raise RuntimeError(
                "ConditionalPolicySwitch: the condition's tensor must have the batch shape "
                f"{tuple(tensordict.batch_size)} or hold a single element, got {tuple(cond.shape)}."
            )
        return (
            cond.bool().reshape(-1)[0].expand(tensordict.batch_size)
            if cond.numel() == 1
            else cond.bool()
        )

    def _inner(self) -> Any:
        inner = self.inner_env
        if inner is None:
            raise RuntimeError(
                "ConditionalPolicySwitch steps the env beneath it: use it inside a TransformedEnv."
            )
        return inner

    def _play(
        self, root: TensorDictBase, cond: torch.Tensor, fallback: TensorDictBase
    ) -> TensorDictBase:
        """``policy`` acts on ``root`` and the env beneath steps the entries in ``cond``."""
        inner = self._inner()
        td = self.policy(root)
        if bool(cond.all()):
            return inner.step(td)
        if getattr(inner.base_env, "batch_locked", True):
            nxt = inner.step(td.set("_step", cond))
        else:
            nxt = fallback.clone()
            sub = inner.step(td[cond])
            nxt[cond] = sub.select(*[k for k in nxt.keys(True, True) if k in sub.keys(True, True)])
        return _rows_where(cond, nxt, fallback)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        cond = self._cond(next_tensordict)
        if not bool(cond.any()):
            return next_tensordict
        step = tensordict.get("_step", None)
        if step is not None:
            cond = cond & step.reshape(cond.shape)
        done = next_tensordict.get("done", None)
        if done is not None:
            cond = cond & ~done.reshape(*cond.shape, -1).any(-1)
        if not bool(cond.any()):
            return next_tensordict
        inner = self._inner()
        root = step_mdp(
            tensordict.exclude("_step").set("next", next_tensordict),
            reward_keys=list(inner.reward_keys),
            action_keys=list(inner.full_action_spec.keys(True, True)),
        )
        return self._play(root, cond, next_tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        cond = self._cond(tensordict_reset)
        reset = tensordict.get("_reset", None) if tensordict is not None else None
        if reset is not None:
            cond = cond & reset.reshape(*cond.shape, -1).any(-1)
        if not bool(cond.any()):
            return tensordict_reset
        out = self._play(tensordict_reset.clone(False), cond, tensordict_reset)
        return out.exclude(*self._inner().reward_keys)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(_STANDALONE)

    def extra_repr(self) -> str:
        return f"policy={self.policy!r}, condition={self.condition!r}"
