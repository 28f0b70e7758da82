"""``MultiAction``: one outer step executes a stack of actions in the env beneath."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, is_composite, rows_where
from rl_envs.transforms.action_chunk import ACTION_CHUNK_KEY
from rl_envs.transforms.transform import EnvSpecs, Transform
from rl_envs.utils import step_mdp

_DONE_NAMES = ("done", "terminated", "truncated")


def _is_done_key(key: NestedKey) -> bool:
    return (key[-1] if isinstance(key, tuple) else key) in _DONE_NAMES


def _done_rows(next_td: TensorDictBase) -> torch.Tensor:
    """``[*B]`` bool: entries whose ``"done"`` is set."""
    done = next_td.get("done", None)
    if done is None:
        return torch.zeros(next_td.batch_size, dtype=torch.bool, device=next_td.device)
    return done.reshape(*next_td.batch_size, -1).any(-1)


class MultiAction(Transform):
    """Executes a stack of actions, one base-env step each, in one outer step.

    The policy writes actions stacked along dim ``batch_dims + dim - 1`` (by default
    the first dim after the batch dims, e.g. ``[*B, n, *action_shape]``). Each outer
    step executes them in order in the env beneath this transform (its base env and
    the transforms placed before it, which therefore run once per action; those after
    it run once per outer step). An entry that reaches ``done`` stops there: its
    later actions are skipped. Extra policy outputs stay on the outer transition.

    With ``stack_rewards`` the rewards of the executed steps are stacked like the
    actions (zeros for skipped steps; if every entry is done before the last action,
    the stack ends with one zero slot for the skipped remainder, as TorchRL); else
    the last reward is kept. ``stack_observations`` stacks the observations too. The
    specs show a chunk of length 1 on the stack dim.

    Args:
        dim: the stack dim, counted after the batch dims (>= 1).
        stack_rewards: stack each step's reward (else keep the last one).
        stack_observations: stack each step's observations (else keep the last ones).
        action_key: the one-step action the env reads (default: all action keys).
        chunk_key: where the policy writes the stacked actions (default ``action_key``).

    Example:
        >>> import torch
        >>> from rl_envs import PendulumEnv, StepCounter, TransformedEnv, Compose
        >>> env = TransformedEnv(PendulumEnv(), Compose(
        ...     StepCounter(step_count_key="base_steps"), MultiAction()))
        >>> r = env.rollout(2, policy=lambda td: td.set("action", torch.zeros(3, 1)))
        >>> r["next", "base_steps"].flatten().tolist(), r["next", "reward"].shape
        ([3, 6], torch.Size([2, 3, 1]))
    """

    steps_inner_env = True

    def __init__(
        self,
        *,
        dim: int = 1,
        stack_rewards: bool = True,
        stack_observations: bool = False,
        action_key: NestedKey | None = None,
        chunk_key: NestedKey | None = None,
    ) -> None:
        if dim < 1:
            raise ValueError(f"MultiAction: dim must be >= 1 (after the batch dims), got {dim}.")
        if action_key is None and chunk_key is not None:
            action_key = "action"
        if action_key is not None and chunk_key is None:
            chunk_key = action_key
        super().__init__(
            in_keys_inv=None if action_key is None else [action_key],
            out_keys_inv=None if chunk_key is None else [chunk_key],
        )
        self.dim = dim
        self.stack_rewards = stack_rewards
        self.stack_observations = stack_observations

    @classmethod
    def from_vla(cls, *, action_key: NestedKey = "action", **kwargs: Any) -> MultiAction:
        """A ``MultiAction`` reading the VLA chunk key ``("vla_action", "chunk")``."""
        return cls(action_key=action_key, chunk_key=ACTION_CHUNK_KEY, **kwargs)

    # ------------------------------------------------------------------ data
    def _keys(self) -> tuple[list[NestedKey], list[NestedKey]]:
        inner = self._require_inner()
        actions = list(self.in_keys_inv) or list(inner.full_action_spec.keys(True, True))
        return actions, list(self.out_keys_inv) or actions

    def _require_inner(self) -> Any:
        inner = self.inner_env
        if inner is None:
            raise RuntimeError(
                "MultiAction steps the env beneath it: use it inside a TransformedEnv."
            )
        return inner

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        action_keys, chunk_keys = self._keys()
        stack_dim = tensordict.batch_dims + self.dim - 1
        chunks: dict[NestedKey, tuple[torch.Tensor, ...]] = {}
        for action_key, chunk_key in zip(action_keys, chunk_keys, strict=True):
            chunk = tensordict.get(chunk_key, None)
            if chunk is None:
                raise KeyError(
                    f"MultiAction expected stacked actions at {chunk_key!r} before env.step "
                    f"(present: {sorted(map(str, tensordict.keys(True, True)))}). For VLA "
                    "policies use MultiAction.from_vla() or pass chunk_key=('vla_action', "
                    "'chunk')."
                )
            chunks[action_key] = chunk.unbind(stack_dim)
            if chunk_key != action_key:
                del tensordict[chunk_key]
            tensordict.set(action_key, chunks[action_key][0])
        self.__dict__["_pending"] = chunks
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        chunks = self.__dict__.pop("_pending", None)
        if chunks is None:
            return next_tensordict
        inner = self._require_inner()
        n = len(next(iter(chunks.values())))
        reward_keys = list(inner.reward_keys)
        obs_keys = [
            k
            for k in next_tensordict.keys(True, True)
            if k not in reward_keys and not _is_done_key(k)
        ]
        rewards = [next_tensordict.select(*reward_keys)]
        observations = [next_tensordict.select(*obs_keys)]
        done = _done_rows(next_tensordict)
        root = tensordict
        locked = getattr(inner.base_env, "batch_locked", True)
        for j in range(1, n):
            if bool(done.all()):
                rewards.append(rewards[-1].apply(torch.zeros_like))
                break
            root = step_mdp(
                root.exclude("_step").set("next", next_tensordict),
                reward_keys=reward_keys,
                action_keys=list(chunks),
            )
            for key, actions in chunks.items():
                root.set(key, actions[j])
            nxt = self._inner_step(inner, root, done, next_tensordict, locked)
            step_reward = nxt.select(*reward_keys)
            if bool(done.any()):
                step_reward = rows_where(done, step_reward.apply(torch.zeros_like), step_reward)
                nxt = rows_where(done, next_tensordict, nxt)
            rewards.append(step_reward)
            observations.append(nxt.select(*obs_keys))
            next_tensordict = nxt
            done = done | _done_rows(nxt)
        self._stack_into(next_tensordict, rewards, reward_keys, self.stack_rewards)
        self._stack_into(next_tensordict, observations, obs_keys, self.stack_observations)
        return next_tensordict

    @staticmethod
    def _inner_step(
        inner: Any,
        root: TensorDictBase,
        done: torch.Tensor,
        last: TensorDictBase,
        locked: bool,
    ) -> TensorDictBase:
        """One step of the entries not done (a partial step if some are)."""
        if not bool(done.any()):
            return inner.step(root)
        if locked:
            return inner.step(root.set("_step", ~done))
        alive = ~done
        sub = inner.step(root[alive])
        out = last.clone()
        out[alive] = sub.select(*[k for k in out.keys(True, True) if k in sub.keys(True, True)])
        return out

    def _stack_into(
        self,
        next_tensordict: TensorDictBase,
        parts: list[TensorDictBase],
        keys: list[NestedKey],
        enabled: bool,
    ) -> None:
        if not enabled or not keys:
            return
        stack_dim = next_tensordict.batch_dims + self.dim - 1
        for key in keys:
            next_tensordict.set(key, torch.stack([p.get(key) for p in parts], stack_dim))

    # ----------------------------------------------------------------- specs
    def _stacked_action_dims(self, action_keys: list[NestedKey]) -> dict[NestedKey, int]:
        keys = list(self.out_keys_inv) or action_keys
        return {key: self.dim - 1 for key in keys}

    def _chunked(self, spec: Any, nb: int) -> Any:
        for _ in range(self.dim):
            spec = spec.unsqueeze(nb)
        return spec

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        nb = len(specs.action.shape)
        action_keys = list(self.in_keys_inv) or list(specs.action.keys(True, True))
        chunk_keys = list(self.out_keys_inv) or action_keys
        for action_key, chunk_key in zip(action_keys, chunk_keys, strict=True):
            leaf = self._chunked(specs.action[action_key], nb)
            if chunk_key != action_key:
                del specs.action[action_key]
            specs.action[chunk_key] = leaf
        for enabled, composite in (
            (self.stack_rewards, specs.reward),
            (self.stack_observations, specs.observation),
        ):
            if not enabled:
                continue
            for key in list(composite.keys(True, True)):
                if not is_composite(composite[key]):
                    composite[key] = self._chunked(composite[key], nb)
        return specs

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, stack_rewards={self.stack_rewards}, "
            f"stack_observations={self.stack_observations}"
        )
