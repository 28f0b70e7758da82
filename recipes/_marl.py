"""Pieces shared by the multi-agent recipes (mappo.py, qmix.py): VMAS env with an exact state,
grouped-reward logging and evaluation."""

from __future__ import annotations

import copy
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, set_interaction_type

from rl_envs import MarlGroupMapType, PettingZooEnv, RewardSum, TransformedEnv, VmasEnv

GROUP = "agents"
_SKIP = (type, type(len), type(lambda: 0))


def _walk(obj: Any, path: tuple, seen: dict[int, tuple], out: dict[tuple, Any], depth: int) -> None:
    """Record every tensor reachable from ``obj`` (attributes, lists, dicts) by its path."""
    if depth > 12 or isinstance(obj, (_SKIP, str, bytes, int, float, bool)):
        return
    if isinstance(obj, torch.Tensor):
        first = seen.setdefault(id(obj), path)
        out[path] = obj.clone() if first == path else ("alias", first)
        return
    if id(obj) in seen:
        return
    seen[id(obj)] = path
    if isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            _walk(item, (*path, ("i", i)), seen, out, depth + 1)
    elif isinstance(obj, dict):
        for key, item in obj.items():
            if isinstance(key, (str, int)):
                _walk(item, (*path, ("k", key)), seen, out, depth + 1)
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("vmas"):
        for name, item in vars(obj).items():
            _walk(item, (*path, ("a", name)), seen, out, depth + 1)


def _put(root: Any, path: tuple, value: Any) -> None:
    owner = root
    for kind, name in path[:-1]:
        owner = getattr(owner, name) if kind == "a" else owner[name]
    kind, name = path[-1]
    if kind == "a":
        object.__setattr__(owner, name, value)
    elif isinstance(owner, tuple):
        raise TypeError(f"cannot restore a tensor inside a tuple at {path}")
    else:
        owner[name] = value


class ResumableVmasEnv(VmasEnv):
    """:class:`rl_envs.VmasEnv` with ``get_state`` / ``set_state`` for bit-identical resumes.

    VMAS keeps its whole simulation (entity states, goals, step counters, scenario
    buffers) in torch tensors hanging off its Python objects; the state is every such
    tensor, by attribute path, and ``set_state`` puts clones back (shared tensors stay
    shared). VMAS draws its random resets from its own RNG states (torch, numpy,
    random), one set for the whole process (``Environment.vmas_random_state``): they
    are saved too.
    """

    def get_state(self) -> dict[str, Any]:
        tensors: dict[tuple, Any] = {}
        _walk(self._env, (), {}, tensors, 0)
        rng = type(self._env).vmas_random_state
        return {
            "env_class": "ResumableVmasEnv",
            "tensors": tensors,
            "vmas_random_state": [rng[0].clone(), copy.deepcopy(rng[1]), copy.deepcopy(rng[2])],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if state.get("env_class") != "ResumableVmasEnv":
            raise ValueError("set_state: this state was not saved by a ResumableVmasEnv.")
        restored: dict[tuple, torch.Tensor] = {}
        for path, value in state["tensors"].items():
            if not (isinstance(value, tuple) and value and value[0] == "alias"):
                restored[path] = value.clone()
                _put(self._env, path, restored[path])
        for path, value in state["tensors"].items():
            if isinstance(value, tuple) and value and value[0] == "alias":
                _put(self._env, path, restored[value[1]])
        rng = state["vmas_random_state"]
        # the list object itself is what VMAS's seeding decorator holds: update it in place
        type(self._env).vmas_random_state[:] = [
            rng[0].clone(),
            copy.deepcopy(rng[1]),
            copy.deepcopy(rng[2]),
        ]


def make_vmas_env(
    scenario: str, num_envs: int, max_steps: int, seed: int, **scenario_kwargs: Any
) -> TransformedEnv:
    """A VMAS scenario with per-agent episode returns at ``("agents", "episode_reward")``."""
    base = ResumableVmasEnv(
        scenario, num_envs=num_envs, max_steps=max_steps, seed=seed, **scenario_kwargs
    )
    return TransformedEnv(
        base, RewardSum(in_keys=[(GROUP, "reward")], out_keys=[(GROUP, "episode_reward")])
    )


def make_pettingzoo_env(task: str, max_steps: int, seed: int, **task_kwargs: Any) -> TransformedEnv:
    """A parallel PettingZoo task (e.g. MPE ``simple_spread_v3``) with every agent in the
    group ``"agents"`` and per-agent episode returns at ``("agents", "episode_reward")``."""
    base = PettingZooEnv(
        task=task,
        parallel=True,
        seed=seed,
        group_map=MarlGroupMapType.ALL_IN_ONE_GROUP,
        max_cycles=max_steps,
        **task_kwargs,
    )
    return TransformedEnv(
        base, RewardSum(in_keys=[(GROUP, "reward")], out_keys=[(GROUP, "episode_reward")])
    )


def finished_return(batch: TensorDictBase) -> float | None:
    """Mean per-agent return of the episodes that end in ``batch`` (TorchRL tutorial's metric)."""
    done = batch["next", "done"]  # [*B, T, 1], shared by the team
    if not done.any():
        return None
    returns = batch["next", GROUP, "episode_reward"]  # [*B, T, n_agents, 1]
    return returns[done.squeeze(-1)].mean().item()


def evaluate_team(env: Any, policy: Any, max_steps: int, seed: int) -> float:
    """Mean per-agent return of one deterministic episode in each of ``env``'s sub-envs."""
    env.set_seed(seed)
    with torch.no_grad(), set_interaction_type(InteractionType.DETERMINISTIC):
        rollout = env.rollout(max_steps, policy, break_when_any_done=False)
    return rollout["next", GROUP, "reward"].sum(-3).mean().item()
