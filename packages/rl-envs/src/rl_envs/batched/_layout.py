"""What SerialEnv and ParallelEnv share: the sub-env metadata, the specs, the buffers.

The batch of a batched env is ``[num_workers * envs_per_worker, *sub_batch]``:
row ``i * envs_per_worker + j`` is sub-env ``j`` of worker ``i``. Three
TensorDicts of that batch size hold everything that crosses a worker boundary,
allocated once (in shared memory for ParallelEnv):

- ``inputs``: action and state entries plus the ``"_reset"`` mask (parent writes);
- ``next``: the step outputs (observations, rewards, done flags; workers write);
- ``reset``: the reset outputs (observations, done flags, states; workers write).

and ``step_mask`` the ``"_step"`` mask of a partial step (parent writes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

NestedKey = str | tuple[str, ...]


@dataclass
class SubEnvMeta:
    """Specs, batch size and device of one sub-env (all sub-envs must agree)."""

    observation: Any
    action: Any
    reward: Any
    done: Any
    state: Any
    batch_size: torch.Size
    device: torch.device | None
    requires_reset: bool = False  # the sub-env refuses step before its first reset


def as_fn_list(
    create_env_fn: Callable[..., Any] | Sequence[Callable[..., Any]], num_workers: int
) -> list[Callable[..., Any]]:
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}.")
    if callable(create_env_fn):
        return [create_env_fn] * num_workers
    fns = list(create_env_fn)
    if len(fns) != num_workers:
        # RuntimeError and its wording: TorchRL's, which user code may catch
        raise RuntimeError(
            f"len(create_env_fn) and num_workers mismatch: create_env_fn is a list of "
            f"{len(fns)} callables but num_workers={num_workers}. Pass one callable, or one "
            "per worker."
        )
    return fns


def as_kwargs_list(
    create_env_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None,
    num_workers: int,
    name: str = "create_env_kwargs",
) -> list[dict[str, Any]]:
    if create_env_kwargs is None:
        return [{} for _ in range(num_workers)]
    if isinstance(create_env_kwargs, dict):
        return [dict(create_env_kwargs) for _ in range(num_workers)]
    kwargs = [dict(k) for k in create_env_kwargs]
    if len(kwargs) != num_workers:
        raise RuntimeError(
            f"len({name}) and num_workers mismatch: {name} holds {len(kwargs)} dicts but "
            f"num_workers={num_workers}. Pass one dict for all workers, or one per worker."
        )
    return kwargs


def check_sub_env(env: Any) -> None:
    """Refuses a sub-env with post-step-mdp hooks: batched envs step sub-envs without them.

    Raises:
        ValueError: naming the sub-env and the fix (put the transform outside).
    """
    if getattr(env, "post_step_mdp_hooks", None) is not None:
        raise ValueError(
            f"A batched env's sub-env ({type(env).__name__}) holds a transform that edits "
            "stored transitions after step_mdp (e.g. NextObservationDelta); SerialEnv and "
            "ParallelEnv step their sub-envs without that hook. Put the transform outside: "
            "TransformedEnv(ParallelEnv(n, make_env), NextObservationDelta())."
        )


def read_meta(env: Any) -> SubEnvMeta:
    """The specs of a built sub-env (checked with :func:`check_sub_env`)."""
    check_sub_env(env)
    return SubEnvMeta(
        observation=env.full_observation_spec.clone(),
        action=env.full_action_spec.clone(),
        reward=env.full_reward_spec.clone(),
        done=env.full_done_spec.clone(),
        state=env.full_state_spec.clone(),
        batch_size=torch.Size(env.batch_size),
        # None: the sub-env's outputs live on several devices (a partial DeviceCastTransform);
        # the batched env then has no device either, as in TorchRL
        device=torch.device(env.device) if env.device is not None else None,
        requires_reset=bool(getattr(env, "_awaiting_reset", False)),
    )


def set_batched_specs(env: Any, meta: SubEnvMeta, n: int) -> None:
    """Gives ``env`` (batch ``[n, *sub_batch]``) the sub-env specs with a leading dim ``n``."""
    full = (n, *meta.batch_size)
    env.full_observation_spec = meta.observation.expand(*full)
    env.full_action_spec = meta.action.expand(*full)
    env.full_reward_spec = meta.reward.expand(*full)
    env.full_done_spec = meta.done.expand(*full)
    env.full_state_spec = meta.state.expand(*full)
    # sub-envs that refuse a step before their first reset make the batch refuse it too
    env._awaiting_reset = meta.requires_reset


def _keys(spec: Any) -> list[NestedKey]:
    return list(spec.keys(include_nested=True, leaves_only=True))


@dataclass
class Buffers:
    """The three exchange TensorDicts and the keys each holds."""

    inputs: TensorDictBase
    next: TensorDictBase
    reset: TensorDictBase
    input_keys: list[NestedKey]
    next_keys: list[NestedKey]
    reset_keys: list[NestedKey]
    step_mask: torch.Tensor  # bool, batch_size: the sub-envs a partial step steps


def make_buffers(env: Any, shared: bool) -> Buffers:
    """Zero-filled exchange buffers for a batched env whose specs are already set."""
    input_keys = _keys(env.full_action_spec) + [
        k for k in _keys(env.full_state_spec) if k not in set(_keys(env.full_action_spec))
    ]
    next_keys = _unique(
        _keys(env.full_observation_spec) + _keys(env.full_reward_spec) + _keys(env.full_done_spec)
    )
    reset_keys = _unique(
        _keys(env.full_observation_spec) + _keys(env.full_done_spec) + _keys(env.full_state_spec)
    )
    batch = env.batch_size

    def zeros(keys: list[NestedKey], specs: list[Any]) -> TensorDictBase:
        td = TensorDict(batch_size=batch, device=env.device)
        for key in keys:
            for spec in specs:
                if key in set(_keys(spec)):
                    _make_parents(td, spec, key)
                    td.set(key, spec[key].zero())
                    break
        return td

    all_specs = [
        env.full_observation_spec,
        env.full_reward_spec,
        env.full_done_spec,
        env.full_action_spec,
        env.full_state_spec,
    ]
    inputs = zeros(input_keys, all_specs)
    inputs.set("_reset", torch.ones((*batch, 1), dtype=torch.bool, device=env.device))
    nxt = zeros(next_keys, all_specs)
    reset = zeros(reset_keys, all_specs)
    step_mask = torch.ones(batch, dtype=torch.bool, device=env.device)
    if shared:
        inputs.share_memory_()
        nxt.share_memory_()
        reset.share_memory_()
        step_mask.share_memory_()
    return Buffers(inputs, nxt, reset, input_keys, next_keys, reset_keys, step_mask)


def _make_parents(td: TensorDictBase, spec: Any, key: NestedKey) -> None:
    """Creates the sub-TensorDicts above ``key`` with their spec's shape (a nested
    ``Composite`` of shape ``[*batch, 5]`` gives a sub-TensorDict of that batch size)."""
    if isinstance(key, str):
        return
    for depth in range(1, len(key)):
        prefix = key[:depth]
        if td.get(prefix, None) is None:
            shape = getattr(spec[prefix], "shape", td.batch_size)
            td.set(prefix, TensorDict(batch_size=shape, device=td.device))


def _unique(keys: list[NestedKey]) -> list[NestedKey]:
    seen: set[NestedKey] = set()
    out = []
    for k in keys:
        if k not in seen:
            seen.add(k)
            out.append(k)
    return out


def write_inputs(buffers: Buffers, tensordict: TensorDictBase, owner: str) -> None:
    """Copies the action and state entries of ``tensordict`` into the input buffer."""
    inputs = buffers.inputs
    for key in buffers.input_keys:
        value = tensordict.get(key, None)
        if value is None:
            raise KeyError(
                f"{owner}.step: input entry {key!r} is missing (present: "
                f"{sorted(tensordict.keys(True, True), key=str)}). Write the action with the "
                "policy (or env.rand_action(td)) and carry state entries over with step_mdp."
            )
        inputs.get(key).copy_(value)


def fill_skipped(
    env: Any, out: TensorDictBase, tensordict: TensorDictBase, mask: torch.Tensor
) -> TensorDictBase:
    """Writes ``env.skip_tensordict(tensordict)`` into the rows of ``out`` not in ``mask``.

    ``out`` is the ``"next"`` of a partial step: the stepped entries (``mask``, of shape
    ``batch_size``) hold the sub-envs' outputs, the others stale buffer content.
    """
    skip = env.skip_tensordict(tensordict)
    keep = mask.reshape(env.batch_size)
    for key in skip.keys(True, True):
        value = out.get(key, None)
        if value is None:
            continue
        m = keep.reshape(*keep.shape, *([1] * (value.ndim - keep.ndim)))
        out.set(key, torch.where(m, value, skip.get(key)))
    return out
