"""A zero batch shaped like a collector's, built from the env's specs (TorchRL's ``fake_tensordict``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

_SPECS = ("full_observation_spec", "full_done_spec", "full_reward_spec", "full_action_spec")


def _spec_zeros(env: Any, name: str) -> TensorDictBase:
    spec = getattr(env, name, None)
    if spec is None or not callable(getattr(spec, "zero", None)):
        raise TypeError(
            f"fake_tensordict() builds the batch from the env's specs, but "
            f"{type(env).__name__} has no {name} with zero(); collect one real batch instead."
        )
    return spec.zero()


def fake_transition(
    env: Any, policy: Callable[[TensorDictBase], TensorDictBase] | None
) -> TensorDictBase:
    """One zero transition (root and ``"next"``) with the keys a real step of ``env`` under
    ``policy`` holds, without stepping the env.

    The root holds the observation, done and state entries, then what ``policy`` writes when
    called once on them (the action spec's zeros without a policy); ``"next"`` holds the
    observation, done and reward entries. Float entries are zeros (the policy's outputs too).

    Raises:
        TypeError: the env lacks a TorchRL-style ``full_*_spec``.
    """
    obs, done, reward, action = (_spec_zeros(env, name) for name in _SPECS)
    root = obs.clone().update(done)
    state = getattr(env, "full_state_spec", None)
    if state is not None and callable(getattr(state, "zero", None)):
        root.update(state.zero())
    if policy is None:
        root.update(action)
    else:
        with torch.no_grad():
            out = policy(root.clone())
        root = (root if out is None else out).apply(torch.zeros_like)
    nxt = root.get("next", None)
    nxt = (
        obs.clone().update(done).update(reward)
        if nxt is None
        else nxt.update(obs).update(done).update(reward)
    )
    return root.set("next", nxt)
