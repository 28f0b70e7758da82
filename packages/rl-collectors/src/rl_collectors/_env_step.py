"""Stepping any env that honours the contract (docs/contract.md, section 1).

The collector never imports an env library. It needs ``reset()``, ``step(td)``
and ``batch_size``; it uses ``step_and_maybe_reset(td)`` when the env offers
it and otherwise builds the next root itself (:func:`step_mdp`) and resets the
done sub-envs through ``"_reset"``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection

NestedKey = str | tuple[str, ...]

DONE_KEY: NestedKey = "done"
TERMINATED_KEY: NestedKey = "terminated"
TRUNCATED_KEY: NestedKey = "truncated"
RESET_KEY = "_reset"


def as_tuple(key: NestedKey) -> tuple[str, ...]:
    """A nested key as a tuple (``"done"`` -> ``("done",)``)."""
    return key if isinstance(key, tuple) else (key,)


def step_mdp(
    tensordict: TensorDictBase,
    reward_keys: Sequence[NestedKey] = ("reward",),
    action_keys: Sequence[NestedKey] = ("action",),
) -> TensorDictBase:
    """Build the input of the next step from a transition (docs/contract.md, section 1).

    The contract ``rl_envs.step_mdp`` states (this package cannot import it): the result
    holds (1) every entry of ``"next"`` except the reward keys, and (2) every other root
    entry except ``"next"``, the action keys and the reward keys, wherever (1) holds no
    entry of the same key (``"next"`` wins; sub-TensorDicts merge leaf by leaf). Entries
    a policy writes at the root are kept. So a collector carries the same root into the
    next batch whether the env's rollout or the collector's step loop built it
    (tests/test_collector_root_carry.py checks both copies agree).

    Args:
        tensordict: a transition holding a ``"next"`` sub-TensorDict.
        reward_keys: keys of ``"next"`` (and of the root) that stay behind.
        action_keys: keys of the root that stay behind.

    Returns:
        A new TensorDict (sharing tensors with ``tensordict`` and its ``"next"``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"observation": torch.zeros(2), "action": torch.ones(1),
        ...     "hidden": torch.ones(3),
        ...     "next": {"observation": torch.ones(2), "reward": torch.ones(1)}}, [])
        >>> sorted(step_mdp(td).keys())
        ['hidden', 'observation']
    """
    nxt = tensordict.get("next", None)
    if nxt is None:
        raise KeyError(
            "step_mdp: the transition has no 'next' entry; expected the output of env.step(td), "
            f"got keys {sorted(map(str, tensordict.keys()))}."
        )
    out = nxt.exclude(*reward_keys)
    if not all(isinstance(key, str) for key in (*reward_keys, *action_keys)):
        carried = tensordict.exclude("next", *reward_keys, *action_keys)
        present = set(out.keys(True, True))
        for key, value in carried.items(True, True):
            if key not in present:
                out.set(key, value)
        return out
    # Plain-string keys (the usual case): walk the root's top level only, descending into a
    # sub-TensorDict only when "next" has an entry of the same name.
    skip = {"next", *reward_keys, *action_keys}
    present = set(out.keys())
    for key, value in tensordict.items():
        if key in skip:
            continue
        if key not in present:
            out.set(key, value)
        elif is_tensor_collection(value) and is_tensor_collection(out.get(key)):
            nested = {as_tuple(k) for k in out.get(key).keys(True, True)}
            for sub_key, leaf in value.items(True, True):
                if as_tuple(sub_key) not in nested:
                    out.set((key, *as_tuple(sub_key)), leaf)
    return out


def _reset_mask_like(done: torch.Tensor) -> torch.Tensor:
    return done.to(torch.bool)


def _nested_reset_keys(env: Any) -> tuple[tuple[str, ...], ...]:
    """The env's ``(*group, "_reset")`` keys when it has no root ``"done"`` (every done flag
    lives in a group, e.g. ``("agents", "done")``): TorchRL envs expect a partial reset
    there, per group, and may refuse a root ``"_reset"``. Empty otherwise."""
    keys = tuple(as_tuple(key) for key in getattr(env, "reset_keys", None) or ())
    if not keys or (RESET_KEY,) in keys:
        return ()
    return keys


def _group_reset_flag(
    root: TensorDictBase, key: tuple[str, ...], mask: torch.Tensor
) -> torch.Tensor:
    """The reset flag of one done group: its own ``"done"`` in ``root`` where present (only
    the done members restart), else the sub-env ``mask`` broadcast to the group."""
    done = root.get((*key[:-1], DONE_KEY), None)
    if done is not None:
        return done.to(torch.bool)
    group = root.get(key[:-1], None) if len(key) > 1 else None
    shape = (*group.batch_size, 1) if group is not None else mask.shape
    flat = mask.reshape(*mask.shape[:-1], *([1] * (len(shape) - mask.ndim + 1)))
    return flat.expand(shape).to(torch.bool)


def partial_reset(env: Any, root: TensorDictBase, mask: torch.Tensor) -> TensorDictBase:
    """Reset the sub-envs flagged by ``mask`` (shape ``[*B, 1]``) and merge them into ``root``.

    The entries whose mask is ``False`` keep the values of ``root``.

    Args:
        env: any env honouring the contract.
        root: the current root TensorDict of batch shape ``env.batch_size``.
        mask: bool tensor ``[*B, 1]`` (``True`` = reset this sub-env).

    Returns:
        ``root`` updated in place with the reset entries.
    """
    request = root.clone(False)
    reset_keys = _nested_reset_keys(env)
    if reset_keys:
        for key in reset_keys:
            request.set(key, _group_reset_flag(root, key, mask))
    else:
        request.set(RESET_KEY, _reset_mask_like(mask))
    fresh = env.reset(request)
    if fresh is None:
        raise RuntimeError("env.reset(td) returned None; the contract asks for a TensorDict.")
    fresh = fresh.exclude(RESET_KEY, *reset_keys)
    if mask.all():
        root.update(fresh)
        return root
    # Merge ourselves so an env that resets (or returns) more than asked cannot leak into
    # the sub-envs that were not done.
    flat_mask = mask.reshape(mask.shape[: len(root.batch_size)])
    for key, value in fresh.items(include_nested=True, leaves_only=True):
        old = root.get(key, None)
        if old is None:
            root.set(key, value)
            continue
        m = flat_mask.reshape(*flat_mask.shape, *([1] * (value.ndim - flat_mask.ndim)))
        root.set(key, torch.where(m, value, old))
    return root


def env_step_and_maybe_reset(
    env: Any,
    tensordict: TensorDictBase,
    reward_keys: Sequence[NestedKey],
    use_env_method: bool,
    action_keys: Sequence[NestedKey] = ("action",),
) -> tuple[TensorDictBase, TensorDictBase]:
    """One transition and the root of the next step, resetting the done sub-envs.

    Args:
        env: any env honouring the contract.
        tensordict: the root holding ``"action"``.
        reward_keys: keys that :func:`step_mdp` leaves behind.
        use_env_method: call ``env.step_and_maybe_reset`` (``True``) or do it here.
        action_keys: root keys that :func:`step_mdp` leaves behind.

    Returns:
        ``(transition, next_root)``.
    """
    if use_env_method:
        return env.step_and_maybe_reset(tensordict)
    transition = env.step(tensordict)
    if transition is None:
        raise RuntimeError(
            "env.step(td) returned None; the contract asks for the TensorDict with 'next'."
        )
    return transition, root_after(env, transition, reward_keys, action_keys)


def has_post_step_mdp_hooks(env: Any) -> bool:
    """Whether the env declares post-step-mdp hooks (docs/contract.md, "Rollouts").

    Such an env's stored transitions may lack what the next root needs, so collectors
    build every root with ``step_and_maybe_reset``. Read under the public name
    (``post_step_mdp_hooks``, rl_envs) and TorchRL's (``_post_step_mdp_hooks``).
    """
    for name in ("post_step_mdp_hooks", "_post_step_mdp_hooks"):
        if getattr(env, name, None) is not None:
            return True
    return False


_ROLLOUT_ARGUMENTS = frozenset({"auto_reset", "tensordict", "break_when_any_done"})


def env_rollout(env: Any) -> Callable[..., TensorDictBase] | None:
    """The env's ``rollout`` when it takes TorchRL's arguments, else ``None``.

    A collector may fill a whole batch with one call
    ``env.rollout(T, policy, auto_reset=False, tensordict=root, break_when_any_done=False)``
    (docs/contract.md, "Rollouts"): an env library can run that loop far faster than a
    step at a time. Envs without such a method are stepped one step at a time.
    """
    rollout = getattr(env, "rollout", None)
    if not callable(rollout):
        return None
    try:
        parameters = inspect.signature(rollout).parameters
    except (TypeError, ValueError):
        return None
    return rollout if parameters.keys() >= _ROLLOUT_ARGUMENTS else None


def done_keys_of(env: Any) -> tuple[NestedKey, ...]:
    """The env's done keys (TorchRL's ``done_keys``: nested ones for multi-agent groups)."""
    keys = getattr(env, "done_keys", None)
    return tuple(key for key in keys if as_tuple(key)[-1] == DONE_KEY) if keys else (DONE_KEY,)


def end_of_trajectory(
    tensordict: TensorDictBase, done_keys: Sequence[NestedKey], batch_dims: int
) -> torch.Tensor:
    """``[*B]`` flags: a sub-env is done when any of its done entries is (a nested entry
    such as ``("agents", "done")`` of shape ``[*B, n_agents, 1]`` counts when any agent is).

    Raises:
        KeyError: none of ``done_keys`` is in ``tensordict``.
    """
    flags = [tensordict.get(key, None) for key in done_keys]
    flags = [flag for flag in flags if flag is not None]
    if not flags:
        raise KeyError(
            f"no done entry {list(done_keys)} in the step output (keys: "
            f"{sorted(map(str, tensordict.keys(True, True)))}); an env must write 'done'."
        )
    batch = tensordict.batch_size[:batch_dims]
    out = flags[0].reshape(*batch, -1).any(-1)
    for flag in flags[1:]:
        out = out | flag.reshape(*batch, -1).any(-1)
    return out


def root_after(
    env: Any,
    last_step: TensorDictBase,
    reward_keys: Sequence[NestedKey],
    action_keys: Sequence[NestedKey] = ("action",),
) -> TensorDictBase:
    """The root that follows ``last_step`` (one transition): :func:`step_mdp`, then reset
    the sub-envs that are done, as :func:`env_step_and_maybe_reset` does after a step."""
    next_root = step_mdp(last_step, reward_keys, action_keys)
    done = next_root.get(DONE_KEY, None)
    if done is None:  # only nested done entries (multi-agent groups)
        done = end_of_trajectory(next_root, done_keys_of(env), next_root.batch_dims)
        done = done.unsqueeze(-1)
    if done.any():
        next_root = partial_reset(env, next_root, done)
    return next_root
