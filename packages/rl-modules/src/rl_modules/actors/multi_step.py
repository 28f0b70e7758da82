"""Run an actor that plans chunks of actions, one action per env step (action chunking)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

_VLA_CHUNK_KEY = ("vla_action", "chunk")


def _last(key: NestedKey) -> str:
    return key[-1] if isinstance(key, tuple) else key


def _with_last(key: NestedKey, name: str) -> NestedKey:
    return (*key[:-1], name) if isinstance(key, tuple) else name


def _unnest(key: NestedKey) -> NestedKey:
    return key[0] if isinstance(key, tuple) and len(key) == 1 else key


def _action_key_for(chunk_key: NestedKey) -> NestedKey:
    """``("vla_action", "chunk")`` -> ``"action"``; ``"x_chunk"`` -> ``"x"`` (same nesting)."""
    if chunk_key == _VLA_CHUNK_KEY:
        return "action"
    return _unnest(_with_last(chunk_key, _last(chunk_key).removesuffix("_chunk")))


class MultiStepActorWrapper(TensorDictModuleBase):
    """Executes the action chunks of ``actor`` one step at a time, re-planning on a cadence.

    The actor writes chunks ``[*B, T, *action_shape]`` (time right after the batch
    dims). The wrapper caches them in the TensorDict, writes the action for the
    current step and a per-env ``counter`` next to ``init_key``; the actor is
    called again only for the envs that were reset (``init_key`` set) or that
    consumed ``replan_interval`` actions (receding-horizon control), so an
    expensive planner runs once per chunk rather than once per step.

    Keys: ``action_keys`` default to the actor's out_keys ending in ``"action"``,
    or are inferred from ``chunk_keys`` (``("vla_action", "chunk")`` and
    ``"action_chunk"`` map to ``"action"``). ``chunk_keys`` default to a VLA-style
    ``("vla_action", "chunk")`` output, then out_keys ending in ``"_chunk"``,
    else the action keys. A chunk written under the action key itself is cached
    under ``"<action>_orig"``; otherwise the chunk key is the cache.

    Args:
        actor: a TensorDict module writing the chunks.
        n_steps: the chunk length ``T`` (checked), or ``None`` to accept any.
        action_keys: the env's action keys.
        chunk_keys: where the actor writes chunks.
        init_key: the reset flag written by ``InitTracker`` (one key). Default ``"is_init"``.
        keep_dim: keep a time dim of size 1 on the executed action.
        replan_interval: re-query the actor after this many actions, in
            ``[1, n_steps]``; default: the whole chunk.

    Raises:
        ValueError: several init keys, or ``replan_interval`` out of range.
        KeyError: (at call) the TensorDict has no ``init_key`` entry.
        RuntimeError: (at call) no cached chunk and not every env is at a reset;
            a chunk whose time dim differs from ``n_steps`` or is shorter than
            ``replan_interval``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> plan = TensorDictModule(
        ...     lambda obs: obs.unsqueeze(1) + torch.arange(3.0).view(1, 3, 1), ["observation"], ["action"]
        ... )
        >>> actor = MultiStepActorWrapper(plan, n_steps=3)
        >>> td = TensorDict(observation=torch.zeros(2, 1), is_init=torch.ones(2, 1, dtype=torch.bool), batch_size=[2])
        >>> actor(td)["action"][:, 0]
        tensor([0., 0.])
        >>> td["is_init"] = torch.zeros(2, 1, dtype=torch.bool)
        >>> actor(td)["action"][:, 0], td["counter"][:, 0]
        (tensor([1., 1.]), tensor([2, 2], dtype=torch.int32))
    """

    def __init__(
        self,
        actor: TensorDictModuleBase,
        n_steps: int | None = None,
        *,
        action_keys: Sequence[NestedKey] | None = None,
        chunk_keys: Sequence[NestedKey] | None = None,
        init_key: NestedKey | None = None,
        keep_dim: bool = False,
        replan_interval: int | None = None,
    ) -> None:
        super().__init__()
        if isinstance(init_key, list):
            raise ValueError(
                f"MultiStepActorWrapper: Only a single init_key can be passed, got {init_key}."
            )
        if replan_interval is not None and (
            replan_interval < 1 or (n_steps is not None and replan_interval > n_steps)
        ):
            raise ValueError(
                f"MultiStepActorWrapper: replan_interval must be in [1, n_steps={n_steps}], got "
                f"{replan_interval}."
            )
        out_keys = [_unnest(k) for k in actor.out_keys]
        if chunk_keys is None:
            found = [k for k in out_keys if k == _VLA_CHUNK_KEY] or [
                k for k in out_keys if _last(k).endswith("_chunk")
            ]
            chunk_keys = found or None
        if action_keys is None:
            if chunk_keys is not None:
                action_keys = [_action_key_for(k) for k in chunk_keys]
            else:
                action_keys = [k for k in out_keys if _last(k).endswith("action")]
        if chunk_keys is None:
            chunk_keys = list(action_keys)
        if not action_keys or len(chunk_keys) != len(action_keys):
            raise ValueError(
                f"MultiStepActorWrapper: could not pair chunk keys {list(chunk_keys)} with action "
                f"keys {list(action_keys)}; pass action_keys= and chunk_keys= of equal length."
            )
        self.actor, self.n_steps, self.keep_dim = actor, n_steps, keep_dim
        self.replan_interval = replan_interval
        self.init_key = "is_init" if init_key is None else _unnest(init_key)
        self.action_keys = [_unnest(k) for k in action_keys]
        self.chunk_keys = [_unnest(k) for k in chunk_keys]
        self.cache_keys = [
            _with_last(c, _last(c) + "_orig") if c == a else c
            for c, a in zip(self.chunk_keys, self.action_keys, strict=True)
        ]
        self.counter_key = _with_last(self.init_key, "counter")
        self.in_keys = [*actor.in_keys, self.init_key]
        self.out_keys = [*self.cache_keys, *self.action_keys, self.counter_key]

    def _plan(self, tensordict: TensorDictBase, replan: torch.Tensor) -> list[torch.Tensor]:
        """Chunks for the envs in ``replan`` (the actor runs on those envs only)."""
        everyone = bool(replan.all())
        sub = tensordict if everyone else tensordict[replan]
        sub = self.actor(sub)
        chunks = []
        for key in self.chunk_keys:
            chunk = sub.get(key)
            time = chunk.shape[sub.ndim] if chunk.ndim > sub.ndim else None
            if time is None or (self.n_steps is not None and time != self.n_steps):
                raise RuntimeError(
                    f"MultiStepActorWrapper: The action's time dimension (dim {sub.ndim} of "
                    f"{key!r}, shape {tuple(chunk.shape)}) does not match n_steps={self.n_steps}; "
                    "the actor must write [*batch, n_steps, *action_shape]."
                )
            if self.replan_interval is not None and time < self.replan_interval:
                raise RuntimeError(
                    f"MultiStepActorWrapper: the chunk length {time} of {key!r} is shorter than "
                    f"replan_interval={self.replan_interval}."
                )
            chunks.append(chunk)
        return chunks

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        is_init = tensordict.get(self.init_key, None)
        if is_init is None:
            raise KeyError(
                f"MultiStepActorWrapper: No init key was passed: {self.init_key!r} is missing from "
                "the TensorDict. Append an InitTracker transform to the env (or pass init_key=)."
            )
        batch = tensordict.batch_size
        init = is_init.reshape(*batch, -1).any(-1)
        counter = tensordict.get(self.counter_key, None)
        caches = [tensordict.get(k, None) for k in self.cache_keys]
        if counter is None or any(c is None for c in caches):
            if not bool(init.all()):
                raise RuntimeError(
                    "MultiStepActorWrapper: Cannot initialize the wrapper: the TensorDict holds no "
                    f"cached chunk ({self.cache_keys}) and {self.init_key!r} is not set for every "
                    "env. Start from a reset TensorDict."
                )
            counter = torch.zeros((*batch, 1), dtype=torch.int32, device=is_init.device)
        steps = counter.reshape(batch)
        if self.replan_interval is not None:
            interval = self.replan_interval
        elif self.n_steps is not None:
            interval = self.n_steps
        else:
            interval = None
        if interval is None:
            # n_steps=None: a chunk is consumed to its end before re-planning
            length = caches[0].shape[len(batch)] if caches[0] is not None else 0
            replan = init | (steps >= length)
        else:
            replan = init | (steps >= interval)
        if bool(replan.any()):
            chunks = self._plan(tensordict, replan)
            if bool(replan.all()):
                caches = chunks
            else:
                caches = [c.clone() for c in caches]
                for cache, chunk in zip(caches, chunks, strict=True):
                    cache[replan] = chunk
            steps = torch.where(replan, torch.zeros_like(steps), steps)
        time_dim = len(batch)
        for cache_key, action_key, cache in zip(
            self.cache_keys, self.action_keys, caches, strict=True
        ):
            index = steps.long().reshape(*batch, *([1] * (cache.ndim - time_dim)))
            index = index.expand(*batch, 1, *cache.shape[time_dim + 1 :])
            action = cache.gather(time_dim, index)
            tensordict.set(cache_key, cache)
            tensordict.set(action_key, action if self.keep_dim else action.squeeze(time_dim))
        tensordict.set(self.counter_key, (steps + 1).reshape(counter.shape).to(counter.dtype))
        return tensordict
